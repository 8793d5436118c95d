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
		// A zone does not take an address out of its range.
		{"http://[fe80::a9fe:a9fe%25eth0]/sync", true},
		{"http://[fe80::1%25eth0]:8080/sync", true},
		// NAT64 forms of a denied IPv4 address (RFC 6052): the well-known
		// prefix, and the local-use prefix at each of its layouts.
		{"http://[64:ff9b::a9fe:a9fe]/sync", true},
		{"http://[64:ff9b::169.254.169.254]/sync", true},
		{"http://[64:ff9b::a01:203]/sync", true},
		{"http://[64:ff9b::a01:204]/sync", false},
		{"http://[64:ff9b:1::a9fe:a9fe]/sync", true},
		{"http://[64:ff9b:1:a9fe:a9:fe00::]/sync", true}, // a /48 prefix: the address around the u octet
		{"http://[64:ff9b:1:0:a9fe:a9fe::]/sync", false}, // not an RFC 6052 layout
		{"http://[2001:db8::a9fe:a9fe]/sync", false},
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

// TestDeniedDestinationsAtDialTime: the dialer's own check sees the forms
// validation sees, zoned and NAT64 addresses included (a name may resolve
// to them).
func TestDeniedDestinationsAtDialTime(t *testing.T) {
	d, err := ParseDestinations(DefaultDeniedDestinations)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		address string
		denied  bool
	}{
		{"[fe80::1%eth0]:443", true},
		{"[64:ff9b::a9fe:a9fe]:443", true},
		{"169.254.169.254:80", true},
		{"[2001:db8::1]:443", false},
		{"192.0.2.1:80", false},
	} {
		if err := d.control("tcp", tc.address, nil); (err != nil) != tc.denied {
			t.Errorf("dialling %s: %v, want denied %v", tc.address, err, tc.denied)
		}
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
