package controller

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/internal/migration"
)

// leftoverCheckPeriod is how often the loop looks for what Metacontroller
// left in the cluster: a migration is done once, and a leftover is worth a
// line in the log and an Event now and then, not a watch.
const leftoverCheckPeriod = 10 * time.Minute

// noticeLeftovers says, when the loop starts and every leftoverCheckPeriod,
// which of Metacontroller's objects take the group from this server.
func (m *Manager) noticeLeftovers(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		findings, err := migration.Find(ctx, m.cfg.Dynamic)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Can't look for Metacontroller's leftovers", "err", err)
		}
		migration.Notice(ctx, findings, m.recorder)
	}, leftoverCheckPeriod)
}
