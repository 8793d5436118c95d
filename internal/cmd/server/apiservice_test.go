package server

import (
	"strings"
	"testing"
)

// TestAPIServiceRegistrationFlagsSayWhatIsMissing: --register-apiservice
// needs the CA kube-apiserver verifies the server with and a Service, and
// standalone mode, which has no kube-apiserver, refuses it.
func TestAPIServiceRegistrationFlagsSayWhatIsMissing(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"off by default", nil, ""},
		{"registered with a CA", []string{"--register-apiservice", "--apiservice-ca-file=/ca.crt"}, ""},
		{"no CA", []string{"--register-apiservice"}, "--register-apiservice needs --apiservice-ca-file"},
		{"no Service", []string{"--register-apiservice", "--apiservice-ca-file=/ca.crt", "--apiservice-service-name="}, "--apiservice-service-name"},
		{"port out of range", []string{"--register-apiservice", "--apiservice-ca-file=/ca.crt", "--apiservice-service-port=0"}, "between 1 and 65535"},
		{"standalone", []string{"--standalone", "--register-apiservice"}, "--register-apiservice has no effect with --standalone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, tc.args...)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
