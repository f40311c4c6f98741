package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/persistence"
	"svc/receipt"
	"svc/receiptlog"
)

// JobReceiptLog is the leader job that extends each tenant's receipt log
// and signs its checkpoints (CONTRACT §17).
const JobReceiptLog = "receipt_log"

// NewReceiptLogJob returns the producer of the receipt log job: every
// interval, on the leader, each tenant whose tree lacks committed receipts
// (or whose latest checkpoint is smaller than its tree) has them appended
// and a checkpoint signed. A tenant whose pass fails is logged and tried
// again at the next tick; only a store that cannot list the tenants fails
// the job.
func NewReceiptLogJob(store persistence.Store, signer *receipt.Signer, origin string, every time.Duration, isLeader func() bool,
	log hclog.Logger) actor.Producer {
	keys := map[string]receiptlog.Keys{} // a pass at a time reads and writes it (the job's inFlight)
	return newLeaderJob(jobSpec{name: JobReceiptLog, every: every, isLeader: isLeader,
		run: func() (string, error) {
			ctx, cancel := ioContext(time.Minute)
			defer cancel()
			return publishLogs(ctx, store, signer, origin, keys, log)
		}})
}

func publishLogs(ctx context.Context, store persistence.Store, signer *receipt.Signer, origin string, keys map[string]receiptlog.Keys,
	log hclog.Logger) (string, error) {
	ids, err := store.LogsBehind(ctx)
	if err != nil {
		return "", err
	}
	published, failed := 0, 0
	for _, id := range ids {
		k, ok := keys[id]
		if !ok {
			if k, err = LogKeys(origin, id, signer); err != nil {
				return "", err
			}
			keys[id] = k
		}
		if _, err := receiptlog.Publish(ctx, store, id, k, time.Now()); err != nil && !errors.Is(err, persistence.ErrNotFound) {
			failed++
			log.Error("receipt log not published", "tenant_id", id, "error", err)
			continue
		}
		published++
	}
	return fmt.Sprintf("%d receipt logs published, %d failed", published, failed), nil
}

// LogKeys are the note keys of a tenant's receipt log: origin/<tenant id>,
// signed with the receipt key.
func LogKeys(origin, tenantID string, signer *receipt.Signer) (receiptlog.Keys, error) {
	o, err := receiptlog.Origin(origin, tenantID)
	if err != nil {
		return receiptlog.Keys{}, err
	}
	return receiptlog.NewKeys(o, signer.PublicKey(), signer.SignNote)
}
