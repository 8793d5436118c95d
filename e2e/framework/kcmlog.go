package framework

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"time"
)

// kube-controller-manager is where an aggregated server that serves the
// cluster badly shows first: its namespace, garbage-collector and quota
// controllers talk to every resource the cluster serves, in protobuf first.
// The stack keeps its log, and TestMain fails a package whose run left
// errors about our group there, except while a test disrupted the stack on
// purpose (a process stopped or killed, until some time after it is back).

// disruptionGrace is how long after a disrupted process is back its
// after-effects may still show in kube-controller-manager's log: the
// garbage collector and the quota controller find a group again on their
// next discovery round (every 30 s), and the aggregator re-checks an
// ExternalName APIService about as often.
const disruptionGrace = 90 * time.Second

// disruption is a time when a test stopped or killed a stack process on
// purpose; end is zero while it lasts.
type disruption struct{ start, end time.Time }

// ourGroupInKCMLog matches what, in a kube-controller-manager log line,
// names this server's group or types: the group, its resources, and the Go
// types of our objects (an encoding error names those, not the group).
var ourGroupInKCMLog = regexp.MustCompile(`metacontroller\.k8s\.io|v1alpha1\.(CompositeController|ControllerRevision|SyncRequest)|compositecontrollers|Deletion of namespace failed`)

// podsStillTerminating matches the namespace controller's report that a
// namespace's pods remain, and nothing else remains: on the pod stack a
// deleted namespace's pods take their grace period to go (kwok deletes
// them as a kubelet would), and the controller retries. It names no other
// resource, so it says nothing about ours.
var podsStillTerminating = regexp.MustCompile(`unexpected items still remain in namespace: \S+ for gvr: /v1, Resource=pods"`)

// aboutOurGroup tells whether a kube-controller-manager log line names our
// group or types.
func aboutOurGroup(line string) bool {
	return ourGroupInKCMLog.MatchString(line) && !podsStillTerminating.MatchString(line)
}

// klogHeader is the header of a klog line: severity, date, time.
var klogHeader = regexp.MustCompile(`^([EW])(\d{4} \d{2}:\d{2}:\d{2}\.\d{6})`)

// Disrupted records that a test is stopping or killing a stack process
// now; Recovered that it is back. Stop, Kill and the restarts of the stack
// call them; a test that disrupts the stack in another way calls them
// itself.
func (s *Stack) Disrupted() {
	s.disruptionsMu.Lock()
	defer s.disruptionsMu.Unlock()
	if n := len(s.disruptions); n > 0 && s.disruptions[n-1].end.IsZero() {
		return
	}
	s.disruptions = append(s.disruptions, disruption{start: time.Now()})
}

// Recovered records that the disrupted processes are back.
func (s *Stack) Recovered() {
	s.disruptionsMu.Lock()
	defer s.disruptionsMu.Unlock()
	if n := len(s.disruptions); n > 0 && s.disruptions[n-1].end.IsZero() {
		s.disruptions[n-1].end = time.Now()
	}
}

func (s *Stack) duringDisruption(t time.Time) bool {
	s.disruptionsMu.Lock()
	defer s.disruptionsMu.Unlock()
	for _, d := range s.disruptions {
		if t.Before(d.start) {
			continue
		}
		if d.end.IsZero() || t.Before(d.end.Add(disruptionGrace)) {
			return true
		}
	}
	return false
}

// ControllerManagerErrors returns the error and warning lines of
// kube-controller-manager's log that name our group or its types, outside
// deliberate disruptions: with the server installed, the cluster's own
// controllers must work with our resources as with any other.
func (s *Stack) ControllerManagerErrors() ([]string, error) {
	kcm := s.current(&s.kcm)
	if kcm == nil {
		return nil, nil
	}
	f, err := os.Open(kcm.LogFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var found []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64*1024), 4*1024*1024)
	year := time.Now().Year()
	for scanner.Scan() {
		line := scanner.Text()
		m := klogHeader.FindStringSubmatch(line)
		if m == nil || !aboutOurGroup(line) {
			continue
		}
		at, err := time.ParseInLocation("2006 0102 15:04:05.000000", strconv.Itoa(year)+" "+m[2], time.Local)
		if err == nil && s.duringDisruption(at) {
			continue
		}
		found = append(found, line)
	}
	return found, scanner.Err()
}
