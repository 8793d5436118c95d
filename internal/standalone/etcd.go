package standalone

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Etcd is an etcd server running inside this process.
type Etcd struct {
	etcd *embed.Etcd
	// ClientURL is where the apiserver's storage connects.
	ClientURL string
}

// StartEtcd starts a single-member etcd that keeps its data in dir, so that
// objects survive a restart, and listens on loopback only. It returns once
// etcd serves.
func StartEtcd(dir string) (*Etcd, error) {
	clientURL, err := freeLoopbackURL()
	if err != nil {
		return nil, err
	}
	peerURL, err := freeLoopbackURL()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "composite-apiserver"
	cfg.Dir = filepath.Join(dir, "etcd")
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// A restarted member must not try to bootstrap the cluster again.
	cfg.ClusterState = embed.ClusterStateFlagNew
	// etcd's own log goes to a file in the data directory: on the console
	// it is noise to a person trying the API (it even logs errors on every
	// clean shutdown), but it is there when something goes wrong.
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	// Keep history bounded as a real cluster would.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("can't start embedded etcd in %s: %w", cfg.Dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("embedded etcd in %s was not ready within 60s", cfg.Dir)
	}
	return &Etcd{etcd: e, ClientURL: clientURL.String()}, nil
}

// Close stops etcd and waits for it to release its data directory.
func (e *Etcd) Close() {
	e.etcd.Close()
}

// freeLoopbackURL returns an http URL on 127.0.0.1 with a port that was free
// a moment ago. etcd needs the port before it listens, so it can't take :0.
func freeLoopbackURL() (*url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("can't find a free loopback port for etcd: %w", err)
	}
	defer l.Close()
	return &url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}
