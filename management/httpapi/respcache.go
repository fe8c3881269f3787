package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Bounds of the list cache: answers kept, and their bytes in all.
const (
	maxListAnswers = 256
	maxListBytes   = 128 << 20
)

// listCache keeps whole encoded answers of lists that show only what the
// network serial and the view revision cover (the group and policy lists
// as callers who see every peer get them), keyed like peerListCache: by
// the account row and view revision read from the store in the request
// before the list is, so right on any number of instances.
type listCache struct{ b *bounded[listKey, cachedList] }

type listKey struct {
	acc  account.ID
	list string
}

type cachedList struct {
	acc  account.Account
	rev  uint64
	body []byte
}

func newListCache() *listCache {
	return &listCache{newBounded[listKey](maxListAnswers, maxListBytes, func(e cachedList) int { return len(e.body) })}
}

func (c *listCache) get(k listKey, acc account.Account, rev uint64) ([]byte, bool) {
	e, ok := c.b.get(k)
	if !ok || e.rev != rev || !reflect.DeepEqual(e.acc, acc) {
		return nil, false
	}
	return e.body, true
}

func (c *listCache) put(k listKey, e cachedList) { c.b.put(k, e, nil) }

// cachedList answers from the cache, or with build's value (encoded as ok
// encodes it) kept for the next request at the same serial and view
// revision.
func (a *API) cachedList(ctx context.Context, w http.ResponseWriter, acc account.ID, list string, build func() (any, error)) error {
	var (
		cur account.Account
		rev uint64
	)
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		var err error
		// The key first: whatever build reads after it is at least as new.
		if _, rev, err = at.ViewRevision(ctx); err != nil {
			return err
		}
		cur, err = at.Account(ctx)
		return err
	})
	if err != nil {
		return err
	}
	k := listKey{acc: acc, list: list}
	if body, ok := a.lists.get(k, cur, rev); ok {
		return writeRaw(w, body)
	}
	v, err := build()
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return err
	}
	a.lists.put(k, cachedList{acc: cur, rev: rev, body: b.Bytes()})
	return writeRaw(w, b.Bytes())
}
