package framework

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// KillEtcd kills etcd (SIGKILL), as a crash would. RestartEtcd brings it
// back; until then kube-apiserver and composite-apiserver run without it.
func (s *Stack) KillEtcd() { s.Disrupted(); s.current(&s.etcd).Kill() }

// KillKubeAPIServer kills kube-apiserver (SIGKILL), as a crash would.
// RestartKubeAPIServer brings it back.
func (s *Stack) KillKubeAPIServer() { s.Disrupted(); s.current(&s.apiserver).Kill() }

// CompositeProcess is the stack's own composite-apiserver, the one behind
// the APIService, as last started.
func (s *Stack) CompositeProcess() *Process { return s.current(&s.composite) }

func (s *Stack) current(p **Process) *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *p
}

// RestartEtcd starts etcd again after KillEtcd, on the same data directory
// and ports, and returns once it is healthy.
func (s *Stack) RestartEtcd(ctx context.Context) error {
	p, err := s.restart(&s.etcd, "etcd", s.Bin.Etcd, s.etcdArgs)
	if err != nil {
		return err
	}
	if err := s.waitHTTP(ctx, "etcd", p, http.DefaultClient, s.EtcdURL+"/health", 60*time.Second); err != nil {
		return err
	}
	s.Recovered()
	return nil
}

// RestartKubeAPIServer starts kube-apiserver again after KillKubeAPIServer,
// with the same flags and port, and returns once /readyz answers. The
// aggregator finds the APIService again in etcd; WaitAPIServiceAvailable
// waits for it to be Available.
func (s *Stack) RestartKubeAPIServer(ctx context.Context) error {
	p, err := s.restart(&s.apiserver, "kube-apiserver", s.Bin.KubeAPIServer, s.apiserverArgs)
	if err != nil {
		return err
	}
	client, err := rest.HTTPClientFor(s.AdminConfig)
	if err != nil {
		return err
	}
	if err := s.waitHTTP(ctx, "kube-apiserver", p, client, s.KubeAPIServerURL+"/readyz", 90*time.Second); err != nil {
		return err
	}
	s.Recovered()
	return nil
}

// restart starts the process in *slot again with args, once it has ended.
func (s *Stack) restart(slot **Process, name, bin string, args []string) (*Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := *slot; old != nil {
		if exited, _ := old.Exited(); !exited {
			return nil, fmt.Errorf("%s is still running", name)
		}
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("%s was never started", name)
	}
	p, err := StartProcess(name, s.logDir(), bin, args...)
	if err != nil {
		return nil, err
	}
	*slot = p
	s.watch(p)
	s.logf("%s restarted (pid %d)", name, p.Pid())
	return p, nil
}
