package hooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

func TestDestinations(t *testing.T) {
	d, err := ParseDestinations(append(DefaultDeniedDestinations, "", "10.1.2.3"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url    string
		denied bool
	}{
		{"http://169.254.169.254/latest/meta-data", true},
		{"http://[fe80::1]:8080/sync", true},
		{"http://[fd00:ec2::254]/sync", true},
		{"http://100.100.100.200/sync", true},
		{"http://[::ffff:169.254.169.254]/sync", true},
		{"http://10.1.2.3/sync", true},
		{"http://10.1.2.4/sync", false},
		{"https://hook.example.com/sync", false}, // a name: checked when dialled
	} {
		if err := d.CheckURL(tc.url); (err != nil) != tc.denied {
			t.Errorf("CheckURL(%s) = %v, want denied %v", tc.url, err, tc.denied)
		}
	}
	if _, err := ParseDestinations([]string{"not-a-cidr"}); err == nil {
		t.Error("a bad CIDR was accepted")
	}
}

// TestDeniedDestinationIsRefusedWhenDialling: a hook whose host resolves
// to a denied address (here localhost, denied for the test) fails with a
// HookFailed-class error naming the range, and no request reaches it.
func TestDeniedDestinationIsRefusedWhenDialling(t *testing.T) {
	reached := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	d, err := ParseDestinations([]string{"127.0.0.0/8", "::1/128"})
	if err != nil {
		t.Fatal(err)
	}
	// By name: validation can't see it, the dialer does.
	url := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	w := mustNew(t, Config{Controller: "c", Hook: "sync", Webhook: urlHook(url), Destinations: d})
	_, err = w.Sync(context.Background(), &hookapi.SyncHookRequest{})
	var call *CallError
	if err == nil || !errors.As(err, &call) || !strings.Contains(err.Error(), "--hook-denied-cidrs") {
		t.Fatalf("a hook at a denied address: %v, want a call error naming the range", err)
	}
	if reached {
		t.Error("the request reached the denied hook")
	}
}
