package conformance_test

import (
	"encoding/json"
)

// The entry types of the files in testdata/sdk/ (README.md there describes
// them). JSON values that the files carry as given are json.RawMessage, so
// that a vector is read back exactly as written.

type signingVector struct {
	Name       string `json:"name"`
	Body       string `json:"body"`
	SigningKey string `json:"signing_key"`
	Header     string `json:"header"`
}

type redactionVector struct {
	Name            string          `json:"name"`
	Parameters      json.RawMessage `json:"parameters"`
	RedactedFields  []string        `json:"redacted_fields"`
	ParametersAfter json.RawMessage `json:"parameters_after,omitempty"`
	Error           string          `json:"error,omitempty"`
}

type retryVector struct {
	Name    string            `json:"name"`
	Status  int               `json:"status"`
	Body    json.RawMessage   `json:"body"`
	Headers map[string]string `json:"headers"`
	Retry   bool              `json:"retry"`
	Error   *string           `json:"error"`
}

type outcomeVector struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
	Outcome  string          `json:"outcome"`
}

type receiptVector struct {
	Name                string          `json:"name"`
	Receipt             json.RawMessage `json:"receipt"`
	PublicKey           string          `json:"public_key"`
	HashValid           bool            `json:"hash_valid"`
	SignatureValid      bool            `json:"signature_valid"`
	VerifyReceiptsValid bool            `json:"verify_receipts_valid"`
	Export              string          `json:"export"`
}

type unicodeVector struct {
	Name             string          `json:"name"`
	ToolCall         json.RawMessage `json:"tool_call"`
	Normalized       string          `json:"normalized"`
	ActionHash       string          `json:"action_hash"`
	UnicodeSensitive bool            `json:"unicode_sensitive"`
	Note             string          `json:"note"`
}

// jcsVector and actionVector are the entries of testdata/jcs/.
type jcsVector struct {
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Canonical string          `json:"canonical"`
}

type actionVector struct {
	Name       string          `json:"name"`
	ToolCall   json.RawMessage `json:"tool_call"`
	ActionHash string          `json:"action_hash"`
}
