package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaderElection configures running the loop on one replica at a time.
type LeaderElection struct {
	// Namespace and Name of the Lease.
	Namespace, Name string
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
}

// RunWithLeaderElection runs run while this replica holds the Lease; API
// serving goes on in every replica regardless. Losing the Lease stops the
// loop (run's context is cancelled) and the replica tries to get it back.
func RunWithLeaderElection(ctx context.Context, kube kubernetes.Interface, le LeaderElection, run func(context.Context)) error {
	logger := klog.FromContext(ctx)
	host, _ := os.Hostname()
	identity := fmt.Sprintf("%s_%d_%d", host, os.Getpid(), time.Now().UnixNano())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, le.Namespace, le.Name,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("can't create the leader election lock: %w", err)
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            le.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					logger.Info("Leading: starting the controller loop", "identity", identity)
					run(ctx)
				},
				OnStoppedLeading: func() {
					logger.Info("Not leading: the controller loop is stopped", "identity", identity)
				},
			},
		})
	}
	return nil
}
