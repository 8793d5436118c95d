package framework

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartThatFailsSaysWhatFailed: a stack that can't come up (here its
// directory is a file) returns the error and logs it with the processes'
// log tails, instead of panicking on the nil stack it returns
// (hack/local-up.sh did, in Stack.LogTails).
func TestStartThatFailsSaysWhatFailed(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	s, err := Start(context.Background(), Options{Dir: notADir, Log: &log})
	if err == nil || s != nil {
		s.Stop()
		t.Fatalf("a stack came up in a file: %v", err)
	}
	if !strings.Contains(log.String(), "start failed: ") || !strings.Contains(log.String(), "not a directory") {
		t.Errorf("the log does not say what failed:\n%s", log.String())
	}
}
