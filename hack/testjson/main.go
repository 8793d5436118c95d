// Command testjson runs a `go test -json` command and prints what that
// command prints without -json: each package's "ok" line, and the whole
// output of a test or package that fails, as it comes. At the end it lists
// the slowest tests, and it exits with the command's status.
//
//	go run ./hack/testjson [-o events.json] [-slowest 10] -- go test -json ./...
//
// -o keeps every event, for comparing the tests two runs ran. With -v among
// the command's arguments, every line is printed, as go test -v does.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"time"
)

func main() {
	out := flag.String("o", "", "write every JSON event of the command to this file")
	slowest := flag.Int("slowest", 10, "list this many of the slowest tests at the end (0: none)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: testjson [-o file] [-slowest n] -- go test -json [flags] [packages]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	code, err := run(flag.Args(), *out, *slowest, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testjson: %v\n", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}

// run runs command, prints its events to w through a report, and returns
// the command's exit code.
func run(command []string, eventsFile string, slowest int, w io.Writer) (int, error) {
	var events io.Writer = io.Discard
	if eventsFile != "" {
		f, err := os.Create(eventsFile)
		if err != nil {
			return 2, err
		}
		defer f.Close()
		events = f
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 2, err
	}
	if err := cmd.Start(); err != nil {
		return 2, err
	}
	r := newReport(w, verbose(command))
	readErr := r.read(io.TeeReader(stdout, events))
	waitErr := cmd.Wait()
	if r.failed {
		fmt.Fprintln(w, "FAIL")
	}
	r.printSlowest(slowest)
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(waitErr, &exit):
		code = exit.ExitCode()
		if code < 0 {
			// Ended by a signal.
			code = 1
		}
	case waitErr != nil:
		return 2, waitErr
	}
	return code, readErr
}

// verbose tells whether the go test command asks for -v.
func verbose(command []string) bool {
	for _, a := range command {
		switch a {
		case "-v", "--v", "-v=true", "-test.v", "-test.v=true":
			return true
		}
	}
	return false
}

// event is one line of `go test -json` (cmd/test2json), and of the build
// events go test -json writes for a package that does not build.
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// testRun is a finished top-level test.
type testRun struct {
	pkg, name string
	elapsed   time.Duration
}

// report prints the events of a go test -json run as go test without -json
// would: a package's own lines are kept until it ends (only its "ok" line
// is printed when it passes), and a top-level test's lines, its subtests'
// among them, until it ends (all printed when it fails).
type report struct {
	w       io.Writer
	verbose bool
	// pkgLines are each running package's lines outside its tests;
	// testLines each running top-level test's, by package and name.
	pkgLines  map[string][]string
	testLines map[string]map[string][]string
	finished  []testRun
	// failed: a package failed, which go test ends its output saying.
	failed bool
}

func newReport(w io.Writer, verbose bool) *report {
	return &report{w: w, verbose: verbose, pkgLines: map[string][]string{}, testLines: map[string]map[string][]string{}}
}

// read handles every line of r; a line that is not an event is printed as
// it is.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	// A test's output line can be long (a dumped object, a log tail).
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			fmt.Fprintln(r.w, line)
			continue
		}
		r.handle(e)
	}
	return sc.Err()
}

func (r *report) handle(e event) {
	if r.verbose {
		// go test -v prints every line as it comes.
		if e.Action == "output" || e.Action == "build-output" {
			fmt.Fprint(r.w, e.Output)
		}
		r.record(e)
		r.failed = r.failed || (e.Action == "fail" && e.Test == "")
		return
	}
	switch e.Action {
	case "build-output":
		// What the compiler says of a package that does not build.
		fmt.Fprint(r.w, e.Output)
	case "output":
		if e.Test == "" {
			r.pkgLines[e.Package] = append(r.pkgLines[e.Package], e.Output)
			return
		}
		tests := r.testLines[e.Package]
		if tests == nil {
			tests = map[string][]string{}
			r.testLines[e.Package] = tests
		}
		top := topLevel(e.Test)
		tests[top] = append(tests[top], e.Output)
	case "pass", "skip", "fail":
		if e.Test == "" {
			r.endPackage(e)
		} else {
			r.endTest(e)
		}
	}
}

// record keeps a top-level test's time when it ends.
func (r *report) record(e event) {
	if e.Test != "" && e.Test == topLevel(e.Test) && (e.Action == "pass" || e.Action == "fail") {
		r.finished = append(r.finished, testRun{pkg: e.Package, name: e.Test, elapsed: time.Duration(e.Elapsed * float64(time.Second))})
	}
}

// endTest prints a failed top-level test's lines, its subtests' with them
// (a subtest's end waits for its parent's).
func (r *report) endTest(e event) {
	r.record(e)
	if e.Test != topLevel(e.Test) {
		return
	}
	if e.Action == "fail" {
		for _, l := range r.testLines[e.Package][e.Test] {
			fmt.Fprint(r.w, l)
		}
	}
	delete(r.testLines[e.Package], e.Test)
}

// endPackage prints the "ok" line of a package that passed, the "?" line
// of one without tests, and everything left of one that failed: the lines
// of a test that never ended (a panic, a timeout) and the package's own.
func (r *report) endPackage(e event) {
	lines := r.pkgLines[e.Package]
	delete(r.pkgLines, e.Package)
	left := r.testLines[e.Package]
	delete(r.testLines, e.Package)
	if e.Action == "fail" {
		r.failed = true
		names := make([]string, 0, len(left))
		for name := range left {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			for _, l := range left[name] {
				fmt.Fprint(r.w, l)
			}
		}
	}
	for _, l := range lines {
		if e.Action == "fail" || e.Action == "skip" || strings.HasPrefix(l, "ok ") {
			fmt.Fprint(r.w, l)
		}
	}
}

// printSlowest lists the n slowest top-level tests, slowest first.
func (r *report) printSlowest(n int) {
	if n <= 0 || len(r.finished) == 0 {
		return
	}
	sort.SliceStable(r.finished, func(i, j int) bool { return r.finished[i].elapsed > r.finished[j].elapsed })
	n = min(n, len(r.finished))
	fmt.Fprintf(r.w, "\nThe %d slowest tests:\n", n)
	for _, t := range r.finished[:n] {
		fmt.Fprintf(r.w, "%8.1fs  %s %s\n", t.elapsed.Seconds(), t.pkg, t.name)
	}
}

// topLevel is the top-level test of a test or subtest name.
func topLevel(name string) string {
	top, _, _ := strings.Cut(name, "/")
	return top
}
