package httpapi

import (
	"time"

	"svc/control"
	"svc/persistence"
	"svc/receiptlog"
)

// witnessCreate is POST /receipts/witnesses.
type witnessCreate struct {
	URL *string `json:"url" openapi:"required,pattern=http_url,maxLength=2048"`
	Key *string `json:"key" openapi:"required,maxLength=512"`
}

// witnessView is a witness of the tenant's receipt log and its last answer.
type witnessView struct {
	WitnessID string     `json:"witness_id" openapi:"format=uuid"`
	TenantID  string     `json:"tenant_id" openapi:"format=uuid"`
	URL       string     `json:"url"`
	Key       string     `json:"key"`
	Name      string     `json:"name"`
	Status    string     `json:"status" openapi:"enum=pending|ok|refused|failing"`
	TreeSize  int64      `json:"tree_size"`
	Error     string     `json:"error"`
	CheckedAt *time.Time `json:"checked_at"`
	CreatedAt time.Time  `json:"created_at"`
}

func viewWitness(w persistence.ReceiptWitness) witnessView {
	return witnessView{WitnessID: w.ID, TenantID: w.TenantID, URL: w.URL, Key: w.Key, Name: receiptlog.WitnessName(w.Key), Status: w.Status, TreeSize: w.Size,
		Error: w.Error, CheckedAt: utcPtr(w.CheckedAt), CreatedAt: w.CreatedAt.UTC()}
}

const witnessDoc = " The leader asks each witness (C2SP tlog-witness: POST <url>/add-checkpoint with the size it last cosigned and the " +
	"consistency proof from it) to cosign every new checkpoint, within SVC_CHECKPOINT_INTERVAL_SECS of its signing, and adds " +
	"its cosignature (C2SP tlog-cosignature) to the checkpoint served. status: pending (not asked yet), ok (cosigned the " +
	"checkpoint of tree_size), failing (could not be asked, or answered wrongly: error says why; asked again after 30 s), " +
	"refused (it refused a checkpoint as inconsistent with one it cosigned: the log was rewritten or forked; a HIGH alert " +
	"receipt_log_refused is raised, and the witness is not asked again until it is deleted and added anew). The witness must " +
	"know the log: its origin (the first line of GET /receipts/checkpoint) and key (GET /receipts/checkpoint/key)."

func (s *Server) registerWitnesses() {
	s.register(Route{Method: "POST", Path: "/receipts/witnesses", Access: AccessAdmin, Tag: "receipts", Status: 201,
		Body: &witnessCreate{}, Resp: witnessView{}, Errors: []int{409},
		Summary: "Have the tenant's receipt log checkpoints cosigned by a witness: url (its submission prefix, http or https; a " +
			"literal address outbound requests may not reach is 400 forbidden_target, as for webhooks) and key (its note verifier " +
			"key, <name>+<hex key hash>+<base64 key>, of type 0x04 cosignature/v1 or 0x01 Ed25519). At most 8 witnesses; a key " +
			"configured already: 409." + witnessDoc,
		Handle: s.createWitness})
	s.register(Route{Method: "GET", Path: "/receipts/witnesses", Access: AccessViewer, Tag: "receipts", Resp: []witnessView{},
		Summary: "The tenant's receipt log witnesses, oldest first, each with its last answer." + witnessDoc,
		Handle:  s.listWitnesses})
	s.register(Route{Method: "DELETE", Path: "/receipts/witnesses/:witness_id", Access: AccessAdmin, Tag: "receipts",
		Status: 204, Errors: []int{404}, Summary: "Stop asking a witness; its cosignatures already added to checkpoints stay.",
		Handle: s.deleteWitness})
}

// createWitness serves POST /receipts/witnesses.
func (s *Server) createWitness(c *Call) (any, error) {
	b := bodyOf[witnessCreate](c)
	w, err := s.Control.CreateWitness(c.Ctx(), operator(c.Principal), control.WitnessSettings{URL: b.URL, Key: b.Key})
	if err != nil {
		return nil, err
	}
	return viewWitness(w), nil
}

// listWitnesses serves GET /receipts/witnesses.
func (s *Server) listWitnesses(c *Call) (any, error) {
	ws, err := s.Store.ListWitnesses(c.Ctx(), c.Principal.TenantID)
	if err != nil {
		return nil, err
	}
	return viewAll(ws, viewWitness), nil
}

// deleteWitness serves DELETE /receipts/witnesses/:witness_id.
func (s *Server) deleteWitness(c *Call) (any, error) {
	return nil, s.Control.DeleteWitness(c.Ctx(), operator(c.Principal), c.Param("witness_id"))
}
