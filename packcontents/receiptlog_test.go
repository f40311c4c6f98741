package packcontents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"svc/evidencepack"
	"svc/evidencepack/packtest"
	"svc/packcontents"
	"svc/receipt"
	"svc/receiptlog"
)

// publish signs a checkpoint of the fixture's log, as the leader's job
// does, with the receipt key.
func (f *fixture) publish(t *testing.T) {
	t.Helper()
	origin, err := receiptlog.Origin("svc.test", f.tenant.ID)
	must(t, err)
	keys, err := receiptlog.NewKeys(origin, f.signer.PublicKey(), f.signer.SignNote)
	must(t, err)
	c, err := receiptlog.Publish(context.Background(), f.store, f.tenant.ID, keys, time.Now())
	must(t, err)
	if c.Size != 2 {
		t.Fatalf("checkpoint of %d receipts, want 2", c.Size)
	}
}

// recraft writes w's members again, signed by the fixture's key (as an
// insider with it could), with edit applied to each.
func (f *fixture) recraft(kind string, w written, edit func(name, content string) string) func(t *testing.T) []byte {
	return func(t *testing.T) []byte {
		var members []packtest.Member
		for _, name := range w.order {
			if name == evidencepack.ManifestName || name == evidencepack.SignatureName {
				continue
			}
			members = append(members, packtest.Member{Name: name, Content: edit(name, string(w.files[name]))})
		}
		return packtest.CraftFor(t, f.tenant.ID, kind, f.signer, members...)
	}
}

func verified(t *testing.T, raw []byte) evidencepack.Report {
	t.Helper()
	rep, err := evidencepack.Verify(bytes.NewReader(raw), int64(len(raw)), nil)
	must(t, err)
	return rep
}

// TestPacksCarryTheReceiptLog: with a checkpoint signed, an incident pack
// carries it and its receipts' inclusion proofs, a compliance pack the
// checkpoint beside the whole chain, and Verify proves every receipt in
// its tree; a pack whose proofs, checkpoint or receipts were changed (and
// the manifest signed again) does not verify.
func TestPacksCarryTheReceiptLog(t *testing.T) {
	f := newFixture(t)
	f.publish(t)
	ctx := context.Background()

	pk, err := packcontents.Incident(ctx, f.store, f.tenant.ID, f.records(t), f.signer)
	must(t, err)
	incident := f.write(t, pk)
	rep := verified(t, incident.raw)
	if !rep.Valid() || rep.Checkpoint == nil || rep.Checkpoint.Size != 2 || rep.Checkpoint.Proven != 2 ||
		rep.Checkpoint.Origin != "svc.test/"+f.tenant.ID {
		t.Fatalf("incident pack: %+v %+v", rep, rep.Checkpoint)
	}
	var proofs evidencepack.InclusionProofs
	decode(t, incident.files[evidencepack.InclusionProofsName], &proofs)
	if proofs.TreeSize != 2 || len(proofs.Proofs) != 2 || proofs.Proofs[0].Seq != 1 || proofs.Proofs[1].LeafIndex != 1 {
		t.Fatalf("inclusion_proofs.json: %+v", proofs)
	}

	pk, err = packcontents.Compliance(ctx, f.store, f.tenant.ID, f.at.Add(-time.Hour), f.at.Add(time.Hour), nil, f.signer)
	must(t, err)
	compliance := f.write(t, pk)
	if rep := verified(t, compliance.raw); !rep.Valid() || rep.Checkpoint == nil || rep.Checkpoint.Proven != 2 {
		t.Fatalf("compliance pack: %+v %+v", rep, rep.Checkpoint)
	}

	otherProof := func(name, content string) string {
		if name != evidencepack.InclusionProofsName {
			return content
		}
		var ps evidencepack.InclusionProofs
		must(t, json.Unmarshal([]byte(content), &ps))
		ps.Proofs[0].Hashes, ps.Proofs[1].Hashes = ps.Proofs[1].Hashes, ps.Proofs[0].Hashes
		b, err := json.Marshal(ps)
		must(t, err)
		return string(b)
	}
	dropProof := func(name, content string) string {
		if name != evidencepack.InclusionProofsName {
			return content
		}
		var ps evidencepack.InclusionProofs
		must(t, json.Unmarshal([]byte(content), &ps))
		ps.Proofs = ps.Proofs[:1]
		b, err := json.Marshal(ps)
		must(t, err)
		return string(b)
	}
	other, err := receipt.NewSigner(bytes.Repeat([]byte{9}, 32))
	must(t, err)
	foreignCheckpoint := func(name, content string) string {
		if name != evidencepack.CheckpointName {
			return content
		}
		cp, err := receiptlog.ReadCheckpoint([]byte(content))
		must(t, err)
		note, err := receiptlog.SignCheckpoint(cp.Origin, cp.Size, cp.Root, mustKeys(t, cp.Origin, other).Signer)
		must(t, err)
		return note
	}
	otherRoot := func(name, content string) string {
		if name != evidencepack.CheckpointName {
			return content
		}
		cp, err := receiptlog.ReadCheckpoint([]byte(content))
		must(t, err)
		cp.Root[0] ^= 1
		note, err := receiptlog.SignCheckpoint(cp.Origin, cp.Size, cp.Root, mustKeys(t, cp.Origin, f.signer).Signer)
		must(t, err)
		return note
	}
	noCheckpoint := func(name, content string) string {
		if name == evidencepack.CheckpointName {
			return "" // craft still lists it: an empty file is no note
		}
		return content
	}
	for _, c := range []struct {
		name, want string
		pack       func(t *testing.T) []byte
	}{
		{"incident: proofs swapped", "does not verify against the checkpoint's root", f.recraft(evidencepack.KindIncident, incident, otherProof)},
		{"incident: a proof dropped", "no proof of receipt", f.recraft(evidencepack.KindIncident, incident, dropProof)},
		{"incident: the checkpoint signed with another key", "signature does not verify", f.recraft(evidencepack.KindIncident, incident, foreignCheckpoint)},
		{"incident: another root, signed", "does not verify against the checkpoint's root", f.recraft(evidencepack.KindIncident, incident, otherRoot)},
		{"incident: an empty checkpoint", "checkpoint.txt", f.recraft(evidencepack.KindIncident, incident, noCheckpoint)},
		{"compliance: another root, signed", "not the tree the checkpoint signs", f.recraft(evidencepack.KindCompliance, compliance, otherRoot)},
		{"compliance: the checkpoint signed with another key", "signature does not verify", f.recraft(evidencepack.KindCompliance, compliance, foreignCheckpoint)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := verified(t, c.pack(t))
			if rep.Valid() || !strings.Contains(strings.Join(rep.Problems, "\n"), c.want) {
				t.Fatalf("problems %q, want one saying %q", rep.Problems, c.want)
			}
		})
	}
}

func mustKeys(t *testing.T, origin string, s *receipt.Signer) receiptlog.Keys {
	t.Helper()
	k, err := receiptlog.NewKeys(origin, s.PublicKey(), s.SignNote)
	must(t, err)
	return k
}
