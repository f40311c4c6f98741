// Compares normalizeIdentifier with svc's own (see check-unicode.go) over every
// code point: exits 1 and lists the first differences when any.
import { createInterface } from "node:readline";
import { normalizeIdentifier } from "../dist/index.js";

const hexes = (s) => Array.from(s, (c) => c.codePointAt(0).toString(16)).join(".");
let n = 0;
let bad = 0;
for await (const line of createInterface({ input: process.stdin })) {
  const [cpHex, a, b] = line.split(" ");
  const s = String.fromCodePoint(parseInt(cpHex, 16));
  const ga = hexes(normalizeIdentifier("x" + s + "x"));
  const gb = hexes(normalizeIdentifier("x" + s + "\u0307"));
  n++;
  if (ga !== a || gb !== b) {
    if (bad++ < 20) console.log(`U+${cpHex}: svc ${a} | ${b}; here ${ga} | ${gb}`);
  }
}
console.log(`${n} code points, ${bad} differ`);
process.exit(bad || n < 1_000_000 ? 1 : 0);
