package store

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/agentq/agentq/internal/record"
)

// KeyInfo is one provider key as the fleet knows it (record.KeyInfo).
type KeyInfo = record.KeyInfo

// Key states of KeyInfo.
const (
	KeyOK       = record.KeyOK
	KeyCooling  = record.KeyCooling
	KeyDisabled = record.KeyDisabled
)

// ErrUnknownKey wraps a key reference that names no known key.
var ErrUnknownKey = record.ErrUnknownKey

// FleetKeys lists the keys the live workers advertise, and also (keys a
// caller's own configuration holds; may be nil), with their shared state:
// three round trips. Sorted by provider and key number.
func (f *Fleet) FleetKeys(ctx context.Context, also []AdKey) ([]KeyInfo, error) {
	ads, err := f.Live(ctx)
	if err != nil {
		return nil, err
	}
	type ref struct{ provider, id string }
	byRef := map[ref]*KeyInfo{}
	var order []ref
	add := func(k AdKey, worker bool) {
		r := ref{k.Provider, k.ID}
		ki, ok := byRef[r]
		if !ok {
			ki = &KeyInfo{Provider: k.Provider, Fingerprint: k.Fingerprint, ID: k.ID, State: KeyOK}
			byRef[r] = ki
			order = append(order, r)
		}
		if worker {
			ki.Workers++
		}
	}
	for _, ad := range ads {
		for _, k := range ad.Keys {
			if k.Provider != "" && k.ID != "" {
				add(k, true)
			}
		}
	}
	for _, k := range also {
		add(k, false)
	}
	var providers []string
	seen := map[string]bool{}
	for _, r := range order {
		if !seen[r.provider] {
			seen[r.provider] = true
			providers = append(providers, r.provider)
		}
	}
	st, err := NewKeyState(f.rdb, f.now).Load(ctx, providers)
	if err != nil {
		return nil, err
	}
	out := make([]KeyInfo, 0, len(order))
	for _, r := range order {
		ki := *byRef[r]
		s := st[r.provider][r.id]
		switch {
		case s.Disabled != "":
			ki.State, ki.Disabled = KeyDisabled, s.Disabled
		case !s.CoolUntil.IsZero():
			t := s.CoolUntil.UTC()
			ki.State, ki.CoolUntil = KeyCooling, &t
		}
		out = append(out, ki)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Provider != b.Provider {
			return a.Provider < b.Provider
		}
		if na, nb := keyNumber(a.Fingerprint), keyNumber(b.Fingerprint); na != nb {
			return na < nb
		}
		return a.Fingerprint < b.Fingerprint
	})
	return out, nil
}

// keyNumber is N of a "provider#N (…abcd)" fingerprint (0 if none).
func keyNumber(fp string) int {
	_, rest, _ := strings.Cut(fp, "#")
	num, _, _ := strings.Cut(rest, " ")
	n, _ := strconv.Atoi(num)
	return n
}

// FindKey resolves "provider#N", or a whole fingerprint "provider#N
// (…abcd)", among keys. It fails (ErrUnknownKey) when the reference is
// malformed, names no key, or names several (workers that number their
// keys differently: the whole fingerprint then tells them apart).
func FindKey(keys []KeyInfo, ref string) (KeyInfo, error) {
	ref = strings.Join(strings.Fields(ref), " ")
	head, rest, _ := strings.Cut(ref, " ")
	prov, num, ok := strings.Cut(head, "#")
	n, err := strconv.Atoi(num)
	if !ok || prov == "" || err != nil || n < 1 {
		return KeyInfo{}, fmt.Errorf("%w: %q is not PROVIDER#N (e.g. openai#2)", ErrUnknownKey, ref)
	}
	var found []KeyInfo
	for _, k := range keys {
		if k.Provider == prov && keyNumber(k.Fingerprint) == n && (rest == "" || k.Fingerprint == ref) {
			found = append(found, k)
		}
	}
	switch len(found) {
	case 0:
		return KeyInfo{}, fmt.Errorf("%w: %q: provider %q has no key #%d (none advertised by a live worker, none in the configuration)", ErrUnknownKey, ref, prov, n)
	case 1:
		return found[0], nil
	}
	fps := make([]string, len(found))
	for i, k := range found {
		fps[i] = k.Fingerprint
	}
	return KeyInfo{}, fmt.Errorf("%w: %q names %d keys (workers number their keys differently): give the whole fingerprint, one of %s",
		ErrUnknownKey, ref, len(found), strings.Join(fps, ", "))
}

// EnableResult is what EnableKeys did, by fingerprint.
type EnableResult = record.EnableResult

// EnableKeys re-enables, for every worker, the key ref names (FindKey
// over FleetKeys(also)) or, with all, every key FleetKeys lists.
func (f *Fleet) EnableKeys(ctx context.Context, also []AdKey, ref string, all bool) (EnableResult, error) {
	res := EnableResult{Enabled: []string{}, NotChanged: []string{}}
	keys, err := f.FleetKeys(ctx, also)
	if err != nil {
		return res, err
	}
	if !all {
		k, err := FindKey(keys, ref)
		if err != nil {
			return res, err
		}
		keys = []KeyInfo{k}
	}
	ks := NewKeyState(f.rdb, f.now)
	for _, k := range keys {
		was, err := ks.Enable(ctx, k.Provider, k.ID)
		if err != nil {
			return res, err
		}
		if was {
			res.Enabled = append(res.Enabled, k.Fingerprint)
		} else {
			res.NotChanged = append(res.NotChanged, k.Fingerprint)
		}
	}
	return res, nil
}
