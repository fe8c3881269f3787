package resolver

import (
	"container/list"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Cache bounds (Options leave them zero for these).
const (
	defaultCacheEntries = 4096
	defaultCacheBytes   = 4 << 20
)

// cacheKey is what makes two questions the same one: names compare
// without case; the DO and CD bits change what an upstream answers.
type cacheKey struct {
	name          string
	qtype, qclass uint16
	do, cd        bool
}

type cacheEntry struct {
	key     cacheKey
	msg     *dns.Msg
	stored  time.Time
	expires time.Time
	size    int
}

// cache holds forwarded answers for their TTL (RFC 1035) and negative
// answers for their SOA's negative TTL (RFC 2308), bounded in entries and
// bytes: the least recently used go first.
type cache struct {
	now                  func() time.Time
	maxEntries, maxBytes int

	mu      sync.Mutex
	entries map[cacheKey]*list.Element // of *cacheEntry
	lru     list.List                  // front: most recently used
	bytes   int
}

func newCache(now func() time.Time, maxEntries, maxBytes int) *cache {
	return &cache{now: now, maxEntries: maxEntries, maxBytes: maxBytes, entries: map[cacheKey]*list.Element{}}
}

func keyOf(q *dns.Msg) cacheKey {
	qu := q.Question[0]
	k := cacheKey{name: dns.CanonicalName(qu.Name), qtype: qu.Qtype, qclass: qu.Qclass, cd: q.CheckingDisabled}
	if o := q.IsEdns0(); o != nil {
		k.do = o.Do()
	}
	return k
}

// get is the cached answer to q, with q's ID and question and every TTL
// counted down by the time it spent here.
func (c *cache) get(q *dns.Msg) (*dns.Msg, bool) {
	k := keyOf(q)
	now := c.now()
	c.mu.Lock()
	el, ok := c.entries[k]
	if !ok {
		c.mu.Unlock()
		return nil, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.expires) {
		c.remove(el)
		c.mu.Unlock()
		return nil, false
	}
	c.lru.MoveToFront(el)
	m := e.msg.Copy()
	c.mu.Unlock()
	age := uint32(now.Sub(e.stored) / time.Second)
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if h := rr.Header(); h.Rrtype != dns.TypeOPT {
				h.Ttl -= min(h.Ttl, age)
			}
		}
	}
	m.Id = q.Id
	m.Question = []dns.Question{q.Question[0]}
	return m, true
}

// put keeps m, the answer to q, for as long as its records say.
func (c *cache) put(q, m *dns.Msg) {
	ttl, ok := cacheTTL(m)
	if !ok || ttl == 0 {
		return
	}
	now := c.now()
	e := &cacheEntry{key: keyOf(q), msg: m.Copy(), stored: now, expires: now.Add(time.Duration(ttl) * time.Second), size: m.Len()}
	if e.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[e.key]; ok {
		c.remove(old)
	}
	c.entries[e.key] = c.lru.PushFront(e)
	c.bytes += e.size
	for len(c.entries) > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

func (c *cache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cacheEntry)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// flush forgets everything (the configuration changed: answers may now
// come from elsewhere).
func (c *cache) flush() {
	c.mu.Lock()
	c.entries = map[cacheKey]*list.Element{}
	c.lru.Init()
	c.bytes = 0
	c.mu.Unlock()
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// cacheTTL is how long m may be cached: the smallest TTL of its answer
// records; for a negative answer (NXDOMAIN, or NOERROR without the data
// asked for) the smaller of its SOA's TTL and MINIMUM, and not at all
// without a SOA (RFC 2308 section 5). Failures and truncated answers are
// not cached.
func cacheTTL(m *dns.Msg) (uint32, bool) {
	if m.Truncated || (m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError) {
		return 0, false
	}
	negative := m.Rcode == dns.RcodeNameError || len(m.Answer) == 0
	if !negative {
		ttl := uint32(maxTTL)
		for _, rr := range m.Answer {
			ttl = min(ttl, rr.Header().Ttl)
		}
		return ttl, true
	}
	for _, rr := range m.Ns {
		if s, ok := rr.(*dns.SOA); ok {
			return min(s.Hdr.Ttl, s.Minttl, maxTTL), true
		}
	}
	return 0, false
}
