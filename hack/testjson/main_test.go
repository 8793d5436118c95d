package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stream is go test -json's events, one a line.
func stream(t *testing.T, events ...event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

func out(pkg, test, line string) event {
	return event{Action: "output", Package: pkg, Test: test, Output: line}
}

func end(action, pkg, test string, elapsed float64) event {
	return event{Action: action, Package: pkg, Test: test, Elapsed: elapsed}
}

// A run of two packages, one passing and one failing, as go test -json
// interleaves them.
func sampleRun(t *testing.T) string {
	return stream(t,
		event{Action: "start", Package: "m/ok"},
		out("m/ok", "", "stack started\n"),
		event{Action: "run", Package: "m/ok", Test: "TestA"},
		out("m/ok", "TestA", "=== RUN   TestA\n"),
		out("m/ok", "TestA", "    a_test.go:1: a passing test's log\n"),
		out("m/ok", "TestA", "--- PASS: TestA (2.00s)\n"),
		end("pass", "m/ok", "TestA", 2),
		out("m/bad", "TestB", "=== RUN   TestB\n"),
		out("m/bad", "TestB", "    b_test.go:1: before the subtests\n"),
		out("m/bad", "TestB/good", "    b_test.go:2: a passing subtest's log\n"),
		end("pass", "m/bad", "TestB/good", 30),
		out("m/bad", "TestB/bad", "    b_test.go:3: the failure\n"),
		end("fail", "m/bad", "TestB/bad", 0.5),
		out("m/bad", "TestB", "--- FAIL: TestB (31.00s)\n"),
		end("fail", "m/bad", "TestB", 31),
		out("m/bad", "TestC", "    c_test.go:1: passes\n"),
		end("pass", "m/bad", "TestC", 1),
		out("m/bad", "TestHung", "=== RUN   TestHung\n"),
		out("m/bad", "", "panic: test timed out after 30m\n"),
		out("m/ok", "", "PASS\n"),
		out("m/ok", "", "ok  \tm/ok\t2.1s\n"),
		end("pass", "m/ok", "", 2.1),
		out("m/bad", "", "FAIL\tm/bad\t1800s\n"),
		end("fail", "m/bad", "", 1800),
		event{Action: "build-output", Package: "m/broken", Output: "# m/broken\nbroken.go:1: undefined: x\n"},
		out("m/none", "", "?   \tm/none\t[no test files]\n"),
		end("skip", "m/none", "", 0),
	) + "not an event, printed as it is\n"
}

func TestItPrintsWhatGoTestWithoutJSONPrints(t *testing.T) {
	var got bytes.Buffer
	r := newReport(&got, false)
	if err := r.read(strings.NewReader(sampleRun(t))); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		// The failed test whole, its subtests with it, when it ends.
		"=== RUN   TestB",
		"    b_test.go:1: before the subtests",
		"    b_test.go:2: a passing subtest's log",
		"    b_test.go:3: the failure",
		"--- FAIL: TestB (31.00s)",
		// A passing package: its ok line only.
		"ok  \tm/ok\t2.1s",
		// A failing package: the test that never ended, then its own lines.
		"=== RUN   TestHung",
		"panic: test timed out after 30m",
		"FAIL\tm/bad\t1800s",
		"# m/broken",
		"broken.go:1: undefined: x",
		"?   \tm/none\t[no test files]",
		"not an event, printed as it is",
	}, "\n") + "\n"
	if got.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", got.String(), want)
	}
	if !r.failed {
		t.Errorf("a failed package is not remembered: the output would not end with FAIL")
	}
}

func TestVerboseCommandsGetEveryLine(t *testing.T) {
	if !verbose([]string{"go", "test", "-json", "-v", "./..."}) || verbose([]string{"go", "test", "-json", "-vet=off", "./..."}) {
		t.Fatal("-v is not told from other flags")
	}
	var got bytes.Buffer
	r := newReport(&got, true)
	if err := r.read(strings.NewReader(sampleRun(t))); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"stack started\n", "a passing test's log\n", "PASS\n", "ok  \tm/ok\t2.1s\n", "FAIL\tm/bad\t1800s\n"} {
		if !strings.Contains(got.String(), want) {
			t.Errorf("verbose output lacks %q:\n%s", want, got.String())
		}
	}
}

func TestSlowestTopLevelTestsFirst(t *testing.T) {
	var got bytes.Buffer
	r := newReport(&got, false)
	if err := r.read(strings.NewReader(sampleRun(t))); err != nil {
		t.Fatal(err)
	}
	got.Reset()
	r.printSlowest(2)
	// TestB/good (30 s) is a subtest: its time is in TestB's.
	want := "\nThe 2 slowest tests:\n    31.0s  m/bad TestB\n     2.0s  m/ok TestA\n"
	if got.String() != want {
		t.Errorf("printed %q, want %q", got.String(), want)
	}
	got.Reset()
	r.printSlowest(0)
	if got.Len() != 0 {
		t.Errorf("-slowest 0 printed %q", got.String())
	}
}

func TestRunExitsWithTheCommandsStatusAndKeepsItsEvents(t *testing.T) {
	events := filepath.Join(t.TempDir(), "events.json")
	line := stream(t, out("m/ok", "", "ok  \tm/ok\t0.1s\n"), end("pass", "m/ok", "", 0.1))
	var got bytes.Buffer
	code, err := run([]string{"sh", "-c", "printf '%s' '" + line + "'; exit 3"}, events, 10, &got)
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 {
		t.Errorf("exit code %d, want the command's 3", code)
	}
	if got.String() != "ok  \tm/ok\t0.1s\n" {
		t.Errorf("printed %q", got.String())
	}
	kept, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	if string(kept) != line {
		t.Errorf("-o kept %q, want the command's events %q", kept, line)
	}
	if code, err := run([]string{"true"}, "", 10, &got); code != 0 || err != nil {
		t.Errorf("a command that succeeds: code %d, %v", code, err)
	}
}
