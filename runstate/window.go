package runstate

import "slices"

// bump adds d to the bucket of at, in the slot of its index modulo n,
// resetting a slot that held an older bucket.
func (w *Window) bump(width, n, at int64, d Slot) {
	idx := at / width
	i := slices.IndexFunc(*w, func(s Slot) bool { return s.I%n == idx%n })
	if i < 0 {
		*w = append(*w, Slot{I: idx})
		i = len(*w) - 1
	}
	s := &(*w)[i]
	// A slot holding an older bucket starts afresh. One holding a later
	// bucket (a skewed clock on another node) keeps it, and the call counts
	// there rather than being lost.
	if s.I < idx {
		*s = Slot{I: idx}
	}
	s.add(d)
}

// add adds d's counts to s and keeps the worse level.
func (s *Slot) add(d Slot) {
	s.C += d.C
	s.M += d.M
	s.D += d.D
	s.Dn += d.Dn
	s.Rs += d.Rs
	s.Nr += d.Nr
	s.Lv = max(s.Lv, d.Lv)
}

// window sums the slots of the window of n slots that ends at now.
func window(slots Window, width, n, now int64) Slot {
	var sum Slot
	oldest := now/width - (n - 1)
	for _, s := range slots {
		if s.I >= oldest {
			sum.add(s)
		}
	}
	return sum
}
