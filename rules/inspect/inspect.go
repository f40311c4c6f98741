// Package inspect scans text for what must not pass through an agent
// unnoticed: personal data and secrets in an MCP tool's response (SPEC
// 4.8), and instructions aimed at the model in a response or in a tool's
// own description and schema (tool poisoning). It is pure: bytes in,
// counts out. A Finding carries a category and a count, never the matched
// text, so nothing it returns can leak what it found.
//
// One pass over the bytes finds the digit runs (SSN shapes, Luhn-valid
// card numbers); one pass with a matcher (a bit per two-byte head, then a
// prefix compare of the few patterns with that head) finds the API-key
// prefixes on the raw text, and one more the injection phrases on a
// lower-cased copy whose whitespace runs are collapsed to one space. The
// benchmark in inspect_test.go shows the throughput on 64 KiB responses.
package inspect

import (
	"bytes"
	"slices"
	"strings"
	"unicode/utf8"
)

// Categories. The first four are the response inspection's (CONTRACT §8);
// the others are only reported on tool descriptions and schemas.
const (
	SSN             = "ssn"
	CreditCard      = "credit_card"
	APIKey          = "api_key"
	PromptInjection = "prompt_injection"
	// HiddenText: zero-width, bidirectional-control or Unicode tag
	// characters, which hide text from a person reading a description
	// while the model still reads it.
	HiddenText = "hidden_text"
	// ModelDirective: instructions addressed to the model rather than a
	// description of the tool ("<IMPORTANT>", "before using this tool").
	ModelDirective = "model_directive"
	// NewURL: a URL in a changed description that its previous version
	// did not have (Changed only).
	NewURL = "new_url"
)

// Finding is one category found and how many times.
type Finding struct {
	Category string `json:"category"`
	Count    int    `json:"count"`
}

// Response scans a tool's response: SSN shapes, Luhn-valid card numbers,
// known API-key prefixes and injection phrases, sorted by category.
func Response(text []byte) []Finding {
	var c counts
	c.digits(text)
	c.add(APIKey, apiKeys(text))
	c.add(PromptInjection, injections.count(fold(text)))
	return c.findings()
}

// Tool scans a tool's description and schema text for poisoning: the
// response categories plus hidden characters and directives to the model.
func Tool(text []byte) []Finding {
	var c counts
	c.digits(text)
	c.add(APIKey, apiKeys(text))
	folded := fold(text)
	c.add(PromptInjection, injections.count(folded))
	c.add(ModelDirective, directives.count(folded))
	c.add(HiddenText, hidden(text))
	return c.findings()
}

// Changed scans a tool whose description changed: Tool's findings on the
// new text, plus NewURL for each URL the new text has and the old lacks.
func Changed(oldText, newText []byte) []Finding {
	f := Tool(newText)
	old := urls(oldText)
	n := 0
	for _, u := range urls(newText) {
		if !slices.Contains(old, u) {
			n++
		}
	}
	if n > 0 {
		f = append(f, Finding{Category: NewURL, Count: n})
		slices.SortFunc(f, func(a, b Finding) int { return strings.Compare(a.Category, b.Category) })
	}
	return f
}

// Count returns the count of a category in findings (0 when absent).
func Count(findings []Finding, category string) int {
	for _, f := range findings {
		if f.Category == category {
			return f.Count
		}
	}
	return 0
}

// counts accumulates findings by category.
type counts struct{ m map[string]int }

func (c *counts) add(category string, n int) {
	if n <= 0 {
		return
	}
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[category] += n
}

func (c *counts) findings() []Finding {
	out := make([]Finding, 0, len(c.m))
	for k, v := range c.m {
		out = append(out, Finding{Category: k, Count: v})
	}
	slices.SortFunc(out, func(a, b Finding) int { return strings.Compare(a.Category, b.Category) })
	return out
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// isWord reports the bytes that may not border a number or a key: letters,
// digits and the underscore (ASCII; other bytes are boundaries).
func isWord(b byte) bool {
	return isDigit(b) || (b|0x20 >= 'a' && b|0x20 <= 'z') || b == '_'
}

// digits finds SSN shapes (ddd-dd-dddd with a valid area, group and
// serial) and card numbers (13 to 19 digits, alone or in groups split by
// single spaces or hyphens, passing the Luhn check), each bordered by
// non-word bytes.
func (c *counts) digits(text []byte) {
	for i := 0; i < len(text); {
		if !isDigit(text[i]) || (i > 0 && isWord(text[i-1])) {
			i++
			continue
		}
		// A run of digits and single separators between digits.
		var ds [20]byte
		n, j, seps, sep := 0, i, 0, byte(0)
		groups := [8]int{}
		g := 0
		for j < len(text) {
			b := text[j]
			if isDigit(b) {
				if n < len(ds) {
					ds[n] = b - '0'
				}
				n++
				if g < len(groups) {
					groups[g]++
				}
				j++
				continue
			}
			if (b == '-' || b == ' ') && j+1 < len(text) && isDigit(text[j+1]) && (sep == 0 || sep == b) {
				sep = b
				seps++
				g++
				j++
				continue
			}
			break
		}
		if j < len(text) && isWord(text[j]) {
			// Glued to a word: not a number on its own. Skip the word.
			for j < len(text) && isWord(text[j]) {
				j++
			}
			i = j
			continue
		}
		switch {
		case sep == '-' && seps == 2 && groups[0] == 3 && groups[1] == 2 && groups[2] == 4 && validSSN(ds[:9]):
			c.add(SSN, 1)
		case n >= 13 && n <= 19 && (seps == 0 || seps <= 4) && luhn(ds[:n]):
			c.add(CreditCard, 1)
		}
		i = j
	}
}

// validSSN rejects the shapes never issued: area 000, 666 or 900-999,
// group 00, serial 0000.
func validSSN(d []byte) bool {
	area := int(d[0])*100 + int(d[1])*10 + int(d[2])
	group := int(d[3])*10 + int(d[4])
	serial := int(d[5])*1000 + int(d[6])*100 + int(d[7])*10 + int(d[8])
	return area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

// luhn reports whether the digits pass the Luhn check (and are not all
// zeros).
func luhn(d []byte) bool {
	sum, zero := 0, true
	for i := len(d) - 1; i >= 0; i-- {
		v := int(d[i])
		if v != 0 {
			zero = false
		}
		if (len(d)-1-i)%2 == 1 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return !zero && sum%10 == 0
}

// keyPrefix is a known API-key prefix and how many key characters must
// follow it.
type keyPrefix struct {
	prefix string
	min    int
	// upper: the tail is upper-case letters and digits only (AWS).
	upper bool
}

// keyPrefixes are the providers' documented token prefixes.
var keyPrefixes = []keyPrefix{
	{"AKIA", 16, true}, {"ASIA", 16, true}, // AWS access key ids
	{"ghp_", 30, false}, {"gho_", 30, false}, {"ghu_", 30, false}, {"ghs_", 30, false}, {"ghr_", 30, false}, // GitHub
	{"github_pat_", 40, false},
	{"glpat-", 20, false},                                            // GitLab
	{"xoxb-", 20, false}, {"xoxp-", 20, false}, {"xoxa-", 20, false}, // Slack
	{"sk_live_", 20, false}, {"rk_live_", 20, false}, {"sk_test_", 20, false}, // Stripe
	{"sk-ant-", 32, false}, {"sk-proj-", 32, false}, {"sk-", 32, false}, // Anthropic, OpenAI
	{"AIza", 35, false},                               // Google
	{"svc_agent_", 43, false}, {"svc_op_", 43, false}, // this gateway's own tokens
}

func keyChar(b byte, upper bool) bool {
	if upper {
		return isDigit(b) || (b >= 'A' && b <= 'Z')
	}
	return isWord(b) || b == '-'
}

// keyHeads matches the key prefixes.
var keyHeads = func() *matcher {
	ps := make([]string, len(keyPrefixes))
	for i, k := range keyPrefixes {
		ps[i] = k.prefix
	}
	return newMatcher(ps)
}()

// apiKeys counts the keys: a prefix at a word start followed by at least
// min key characters. The longest prefix that matches wins (sk-ant- over
// sk-), and the scan resumes after the key.
func apiKeys(text []byte) int {
	n := 0
	for at := 0; at+1 < len(text); at++ {
		cands := keyHeads.at(text, at)
		if cands == nil || (at > 0 && (isWord(text[at-1]) || text[at-1] == '-')) {
			continue
		}
		best := -1
		for _, i := range cands {
			k := keyPrefixes[i]
			if !bytes.HasPrefix(text[at:], []byte(k.prefix)) {
				continue
			}
			j := at + len(k.prefix)
			for j < len(text) && keyChar(text[j], k.upper) {
				j++
			}
			if j-at-len(k.prefix) >= k.min && j > best {
				best = j
			}
		}
		if best > 0 {
			n++
			at = best - 1
		}
	}
	return n
}

// matcher finds a fixed set of patterns (each at least two bytes) in one
// pass: a bit per possible two-byte head says whether any pattern starts
// with it, and only then are that head's patterns compared.
type matcher struct {
	pats  [][]byte
	heads [1 << 16 / 64]uint64
	by    map[uint16][]int
}

func newMatcher(pats []string) *matcher {
	m := &matcher{by: map[uint16][]int{}}
	for i, p := range pats {
		if len(p) < 2 {
			panic("inspect: a pattern shorter than two bytes: " + p)
		}
		m.pats = append(m.pats, []byte(p))
		h := uint16(p[0])<<8 | uint16(p[1])
		m.heads[h>>6] |= 1 << (h & 63)
		m.by[h] = append(m.by[h], i)
	}
	return m
}

// at returns the indexes of the patterns whose head is at text[at:], or nil.
func (m *matcher) at(text []byte, at int) []int {
	h := uint16(text[at])<<8 | uint16(text[at+1])
	if m.heads[h>>6]&(1<<(h&63)) == 0 {
		return nil
	}
	return m.by[h]
}

// count counts the occurrences of every pattern.
func (m *matcher) count(text []byte) int {
	n := 0
	for at := 0; at+1 < len(text); at++ {
		for _, i := range m.at(text, at) {
			if bytes.HasPrefix(text[at:], m.pats[i]) {
				n++
			}
		}
	}
	return n
}

// fold lower-cases ASCII letters, drops the hidden characters (so that a
// zero-width space cannot split a phrase) and collapses every run of
// whitespace to one space.
func fold(text []byte) []byte {
	out := make([]byte, 0, len(text))
	space := false
	for i := 0; i < len(text); {
		b := text[i]
		if b < utf8.RuneSelf {
			i++
			switch {
			case b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\f' || b == '\v':
				if !space {
					out = append(out, ' ')
					space = true
				}
				continue
			case b >= 'A' && b <= 'Z':
				b += 'a' - 'A'
			}
			out = append(out, b)
			space = false
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		i += size
		if isHidden(r) {
			continue
		}
		if r == 0x00A0 || r == 0x3000 || (r >= 0x2000 && r <= 0x200A) {
			if !space {
				out = append(out, ' ')
				space = true
			}
			continue
		}
		out = append(out, text[i-size:i]...)
		space = false
	}
	return out
}

// injections and directives match the phrases below.
var injections, directives = newMatcher(injectionPhrases), newMatcher(directivePhrases)

// injectionPhrases are instructions that try to override the agent's own
// (lower case, single spaces: compared with fold's output).
var injectionPhrases = []string{
	"ignore previous instructions", "ignore all previous instructions", "ignore the previous instructions",
	"ignore prior instructions", "ignore all prior instructions", "ignore the above instructions",
	"ignore your instructions", "disregard previous instructions", "disregard all previous instructions",
	"disregard the above", "disregard your instructions", "forget your instructions",
	"forget all previous instructions", "override your instructions", "new instructions:",
	"reveal your system prompt", "print your system prompt", "show your system prompt",
	"<|im_start|>", "<|system|>",
}

// directivePhrases address the model from inside a tool's description.
var directivePhrases = []string{
	"<important>", "before using this tool", "before calling this tool", "do not tell the user",
	"don't tell the user", "without telling the user", "do not inform the user", "do not mention this",
	"the user must not know", "always call this tool", "instead of any other tool", "send the contents",
	"pass its contents", "~/.ssh", "id_rsa",
}

// isHidden reports the invisible characters used to hide text: zero-width
// ones, bidirectional controls and the Unicode tag block.
func isHidden(r rune) bool {
	switch {
	case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x2064,
		r >= 0x2066 && r <= 0x2069, r == 0xFEFF, r == 0x180E, r >= 0xE0000 && r <= 0xE007F:
		return true
	}
	return false
}

func hidden(text []byte) int {
	n := 0
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(text[i:])
		i += size
		if isHidden(r) {
			n++
		}
	}
	return n
}

// urls returns the http and https URLs in text (up to the first space,
// quote or angle bracket), lower-cased, without duplicates.
func urls(text []byte) []string {
	var out []string
	lower := bytes.ToLower(text)
	for off := 0; ; {
		i := bytes.Index(lower[off:], []byte("http"))
		if i < 0 {
			return out
		}
		at := off + i
		off = at + 4
		rest := lower[at:]
		var scheme int
		switch {
		case bytes.HasPrefix(rest, []byte("https://")):
			scheme = 8
		case bytes.HasPrefix(rest, []byte("http://")):
			scheme = 7
		default:
			continue
		}
		j := scheme
		for j < len(rest) && !bytes.ContainsRune([]byte(" \t\r\n\"'<>`()[]{}"), rune(rest[j])) {
			j++
		}
		if j > scheme {
			u := string(bytes.TrimRight(rest[:j], ".,;:!?"))
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
		off = at + j
	}
}
