package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"svc/persistence"
	"svc/receiptlog"
)

// Witnesses of the receipt log (CONTRACT §17, C2SP tlog-witness): the
// leader's receipt log job asks each of a tenant's witnesses to cosign its
// latest checkpoint. The job reads them from the store at every pass, so a
// change needs no cache dropped.

// WitnessSettings are a witness as an operator gives it: its submission
// prefix and its cosignature verifier key.
type WitnessSettings struct {
	URL *string
	Key *string
}

// CreateWitness adds a witness to the tenant's receipt log (url: as
// AdmitTarget admits; key: a cosignature/v1 or Ed25519 note verifier
// key), with a receipt_witness_created config_change event. A key the
// tenant has configured already, or a ninth witness: 409.
func (p *Plane) CreateWitness(ctx context.Context, op Operator, s WitnessSettings) (persistence.ReceiptWitness, error) {
	raw := ""
	if s.URL != nil {
		raw = *s.URL
	}
	target, err := p.AdmitTarget(raw)
	if err != nil {
		return persistence.ReceiptWitness{}, err
	}
	if s.Key == nil || *s.Key == "" {
		return persistence.ReceiptWitness{}, invalid("key", "is required")
	}
	v, err := receiptlog.WitnessVerifier(*s.Key)
	if err != nil {
		return persistence.ReceiptWitness{}, invalid("key", "is not a note verifier key (<name>+<hex key hash>+<base64 key>) of an "+
			"Ed25519 or cosignature/v1 key")
	}
	w := persistence.ReceiptWitness{ID: uuid.NewString(), TenantID: op.TenantID, URL: target, Key: *s.Key,
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}
	var created persistence.ReceiptWitness
	err = p.change(func() (err error) {
		created, err = p.d.Store.CreateWitness(ctx, w, Event(op, "config_change", "receipt_witness_created", "",
			map[string]any{"witness_id": w.ID, "url_host": URLHost(target), "name": v.Name()}))
		if errors.Is(err, persistence.ErrConflict) {
			return &Refusal{Kind: Exists, What: "receipt witness", Code: "witness_exists",
				Message: fmt.Sprintf("the tenant has a witness with this key already, or %d witnesses", persistence.MaxWitnesses)}
		}
		return err
	}, nil)
	return created, err
}

// DeleteWitness removes a witness (its cosignatures already kept stay in
// their checkpoints), with a receipt_witness_deleted config_change event.
// An unknown witness: NotFound.
func (p *Plane) DeleteWitness(ctx context.Context, op Operator, id string) error {
	return p.change(func() error {
		err := p.d.Store.DeleteWitness(ctx, op.TenantID, id, Event(op, "config_change", "receipt_witness_deleted", "",
			map[string]any{"witness_id": id}))
		return refuse(err, "receipt witness", nil)
	}, nil)
}
