package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/hashicorp/go-hclog"

	"svc/messages"
	"svc/persistence"
	"svc/receipt"
	"svc/receiptlog"
)

// JobReceiptLog is the leader job that extends each tenant's receipt log
// and signs its checkpoints (CONTRACT §17).
const JobReceiptLog = "receipt_log"

// ReceiptLogOptions are the receipt log job's settings.
type ReceiptLogOptions struct {
	Store  persistence.Store
	Signer *receipt.Signer
	// Origin is the origin prefix (SVC_LOG_ORIGIN).
	Origin   string
	Every    time.Duration
	IsLeader func() bool
	// Post asks the tenants' witnesses (outbound.Exchanger).
	Post receiptlog.Post
	// Refused hears of a witness that starts refusing a tenant's
	// checkpoints (the security pipeline's HIGH alert).
	Refused func(*messages.LogRefused)
	Log     hclog.Logger
}

// NewReceiptLogJob returns the producer of the receipt log job: every
// interval, on the leader, each tenant whose tree lacks committed receipts
// (or whose latest checkpoint is smaller than its tree) has them appended
// and a checkpoint signed, then every witness behind its tenant's latest
// checkpoint is asked to cosign it. A tenant or witness whose pass fails
// is logged and tried again at the next tick; only a store that cannot
// list them fails the job.
func NewReceiptLogJob(o ReceiptLogOptions) actor.Producer {
	keys := map[string]receiptlog.Keys{} // a pass at a time reads and writes it (the job's inFlight)
	return newLeaderJob(jobSpec{name: JobReceiptLog, every: o.Every, isLeader: o.IsLeader,
		run: func() (string, error) {
			ctx, cancel := ioContext(time.Minute)
			defer cancel()
			published, err := publishLogs(ctx, o.Store, o.Signer, o.Origin, keys, o.Log)
			if err != nil {
				return "", err
			}
			witnessed, err := askWitnesses(ctx, o)
			if err != nil {
				return "", err
			}
			return published + "; " + witnessed, nil
		}})
}

// witnessRetry is how long a witness that could not be asked is left
// alone before it is asked again.
const witnessRetry = 30 * time.Second

// askWitnesses asks each witness behind its tenant's latest checkpoint to
// cosign it.
func askWitnesses(ctx context.Context, o ReceiptLogOptions) (string, error) {
	ws, err := o.Store.WitnessesBehind(ctx)
	if err != nil {
		return "", err
	}
	cosigned, refused, failed := 0, 0, 0
	latest := map[string]persistence.Checkpoint{}
	for _, w := range ws {
		if w.Status == persistence.WitnessFailing && w.CheckedAt != nil && time.Since(*w.CheckedAt) < witnessRetry {
			continue
		}
		c, ok := latest[w.TenantID]
		if !ok {
			if c, err = o.Store.LatestCheckpoint(ctx, w.TenantID); err != nil {
				failed++
				o.Log.Error("latest checkpoint not read", "tenant_id", w.TenantID, "error", err)
				continue
			}
			latest[w.TenantID] = c
		}
		err := receiptlog.AskWitness(ctx, o.Store, o.Post, w, c, time.Now())
		var refusal *receiptlog.RefusedError
		switch {
		case err == nil:
			cosigned++
		case errors.As(err, &refusal):
			refused++
			o.Log.Error("witness refused the receipt log's checkpoint", "tenant_id", w.TenantID, "witness", w.URL, "size", c.Size,
				"error", err)
			if w.Status != persistence.WitnessRefused && o.Refused != nil {
				o.Refused(&messages.LogRefused{TenantID: w.TenantID, Witness: receiptlog.WitnessName(w.Key), URL: w.URL, Size: c.Size,
					Reason: refusal.Reason, At: time.Now()})
			}
		default:
			failed++
			o.Log.Warn("witness not asked", "tenant_id", w.TenantID, "witness", w.URL, "error", err)
		}
	}
	return fmt.Sprintf("%d cosigned, %d refused, %d failed", cosigned, refused, failed), nil
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
