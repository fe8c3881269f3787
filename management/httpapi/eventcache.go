package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Bounds of the event cache: accounts kept, and their encoded events'
// bytes in all.
const (
	maxEventAccounts = 256
	maxEventBytes    = 128 << 20
)

// eventCache keeps each account's audit events encoded but for the
// initiator's name and email (users change; they are read fresh). The
// activity log is append-only with dense sequence numbers
// (store.AccountTx.EventSpan), so a request reads only the events newer
// than those kept; any other span (events removed) drops the account's
// entry. Right on any number of instances: the span is read from the
// store in each request.
type eventCache struct {
	b *bounded[account.ID, *eventLog]
}

// eventLog is one account's events 1..len(events) in sequence order.
type eventLog struct {
	buf    []byte
	events []encodedEvent
}

// encodedEvent ends its head (up to initiator_id) and tail (from
// target_id) in buf, the tail starting where the head ends.
type encodedEvent struct {
	initiator  string
	head, tail int
}

func newEventCache() *eventCache {
	return &eventCache{newBounded[account.ID](maxEventAccounts, maxEventBytes, func(l *eventLog) int { return len(l.buf) })}
}

// snapshot returns the account's kept events (never changed later: new
// ones are appended past them).
func (c *eventCache) snapshot(acc account.ID) eventLog {
	if l, ok := c.b.get(acc); ok {
		return *l
	}
	return eventLog{}
}

// extend keeps l as the account's events if it extends what is kept, or
// replaces it when shorter (events removed: l was read whole).
func (c *eventCache) extend(acc account.ID, l eventLog) {
	if len(l.buf) > maxEventBytes {
		c.b.remove(acc)
		return
	}
	c.b.put(acc, &l, func(old *eventLog) bool {
		return len(old.events) > len(l.events) && len(old.buf) > 0 && len(l.events) > 0 // a concurrent request kept more
	})
}

// appendEvent encodes e into l (e.ID must be len(l.events)+1).
func (l *eventLog) appendEvent(e account.Event) error {
	meta := e.Meta
	if meta == nil {
		meta = map[string]string{}
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	b := l.buf
	b = appendField(b, `{"id":`, strconv.FormatInt(e.ID, 10))
	b = appendField(b, `,"timestamp":`, ts(e.At))
	b = appendField(b, `,"activity":`, account.ActivityText(e.Activity))
	b = appendField(b, `,"activity_code":`, e.Activity)
	b = appendField(b, `,"initiator_id":`, e.Initiator)
	head := len(b)
	b = appendField(b, `,"target_id":`, e.Target)
	b = append(append(b, `,"meta":`...), m...)
	b = append(b, '}')
	l.buf = b
	l.events = append(l.events, encodedEvent{initiator: e.Initiator, head: head, tail: len(b)})
	return nil
}

// cachedEvents answers the audit event list from the cache, reading the
// events added since, or reports false when the log is not a dense span
// (it then lists as before).
func (a *API) cachedEvents(w http.ResponseWriter, r *http.Request, acc account.ID) (bool, error) {
	ctx := r.Context()
	var (
		l  eventLog
		us []account.User
	)
	dense := true
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		count, newest, err := at.EventSpan(ctx)
		if err != nil {
			return err
		}
		if count != newest {
			dense = false
			return nil
		}
		l = a.eventLogs.snapshot(acc)
		if int64(len(l.events)) > newest {
			l = eventLog{} // events were removed: read them all again
		}
		if have := int64(len(l.events)); have < newest {
			// Appended into arrays of their own: another request may be
			// extending the same snapshot.
			l.buf, l.events = l.buf[:len(l.buf):len(l.buf)], l.events[:len(l.events):len(l.events)]
			es, err := at.EventsAfter(ctx, have, newest)
			if err != nil {
				return err
			}
			for i, e := range es {
				if e.ID != have+int64(i)+1 {
					dense = false
					return nil
				}
				if err := l.appendEvent(e); err != nil {
					return err
				}
			}
			if int64(len(l.events)) != newest {
				dense = false
				return nil
			}
			a.eventLogs.extend(acc, l)
		}
		us, err = at.Users(ctx)
		return err
	})
	if err != nil || !dense {
		return false, err
	}
	byID := make(map[string]account.User, len(us))
	for _, u := range us {
		byID[string(u.ID)] = u
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	b := make([]byte, 0, writeChunk+4096)
	b = append(b, '[')
	for i := len(l.events) - 1; i >= 0; i-- {
		e := l.events[i]
		from := 0
		if i > 0 {
			from = l.events[i-1].tail
		}
		if i < len(l.events)-1 {
			b = append(b, ',')
		}
		u := byID[e.initiator]
		b = append(b, l.buf[from:e.head]...)
		b = appendField(b, `,"initiator_name":`, u.Name)
		b = appendField(b, `,"initiator_email":`, u.Email)
		b = append(b, l.buf[e.head:e.tail]...)
		if len(b) >= writeChunk {
			if _, err := w.Write(b); err != nil {
				return true, nil // the client left; the status is sent
			}
			b = b[:0]
		}
	}
	b = append(b, ']', '\n')
	_, _ = w.Write(b)
	return true, nil
}
