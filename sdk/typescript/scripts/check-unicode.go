//go:build ignore

// check-unicode prints, for every code point (surrogates excepted), svc's own
// rule 7 (canonical.NormalizeIdentifier) of the code point alone and followed
// by U+0307, one line each: "<hex cp> <hex of result>...". The TypeScript
// check (scripts/check-unicode.mjs) compares normalizeIdentifier with it:
//
//	go run scripts/check-unicode.go | node scripts/check-unicode.mjs
package main

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"svc/canonical"
)

func hexes(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 {
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "%x", r)
	}
	return b.String()
}

func main() {
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	for cp := rune(0); cp <= 0x10ffff; cp++ {
		if cp >= 0xd800 && cp <= 0xdfff {
			continue
		}
		s := string(cp)
		fmt.Fprintf(w, "%x %s %s\n", cp, hexes(canonical.NormalizeIdentifier("x"+s+"x")), hexes(canonical.NormalizeIdentifier("x"+s+"\u0307")))
	}
}
