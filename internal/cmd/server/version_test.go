package server

import (
	"bytes"
	"context"
	"testing"
)

// --version answers without starting anything: no etcd, no certificates,
// no cluster (an image is inspected that way), and says "dev" unless the
// build stamped a version.
func TestVersionFlagPrintsTheStampedVersion(t *testing.T) {
	for _, tc := range []struct {
		name, stamped, want string
	}{
		{"unstamped build", "dev", "composite-apiserver dev\n"},
		{"stamped with -ldflags -X", "v1.2.3", "composite-apiserver v1.2.3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(v string) { version = v }(version)
			version = tc.stamped
			var stdout, stderr bytes.Buffer
			cmd := NewCommand(context.Background(), NewOptions(&stdout, &stderr))
			// Without --standalone and without --etcd-servers, a server
			// would refuse to start: --version must not get that far.
			cmd.SetArgs([]string{"--version"})
			if err := cmd.Execute(); err != nil {
				t.Fatalf("--version: %v (stderr %q)", err, stderr.String())
			}
			if got := stdout.String(); got != tc.want {
				t.Errorf("--version printed %q, want %q", got, tc.want)
			}
		})
	}
}
