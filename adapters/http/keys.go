package hookhttp

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hookrelay/hookrelay/adapters/http/internal/signature"
)

// maxCachedKeys bounds a Sender's cache of decoded signing keys.
const maxCachedKeys = 4096

// maxCachedSecretLen is the longest secret the cache keeps, so that its
// bound in entries bounds its memory too. Standard Webhooks keys are 24 to
// 64 bytes (at most 94 characters as "whsec_" base64); a longer secret
// still signs, but is decoded at each send rather than pinned (with its
// decoded key) for the Sender's lifetime.
const maxCachedSecretLen = 1024

// keyCache maps a signing secret, by its value, to its decoded Key, so a
// send does not decode the secret and key a new HMAC every time. Keying by
// the value (never by destination) makes a rotated secret take effect on
// the next attempt: the new value is simply another entry. Invalid secrets
// are not cached, nor are secrets longer than maxCachedSecretLen. When the
// cache holds maxCachedKeys entries, adding one evicts another, chosen
// arbitrarily. Safe for concurrent use.
type keyCache struct {
	m sync.Map // secret string → *signature.Key
	n atomic.Int64
}

// keys appends the Key of each secret to dst, in order. The error, for a
// secret that does not decode, names its position, never its value (as
// decodeKeys does).
func (c *keyCache) keys(dst []*signature.Key, secrets []string) ([]*signature.Key, error) {
	for i, sec := range secrets {
		if k, ok := c.m.Load(sec); ok {
			dst = append(dst, k.(*signature.Key))
			continue
		}
		raw, err := signature.DecodeSecret(sec)
		if err != nil {
			return nil, fmt.Errorf("signing secret %d of %d: %w", i+1, len(secrets), err)
		}
		if len(sec) > maxCachedSecretLen {
			dst = append(dst, signature.NewKey(raw))
			continue
		}
		k, loaded := c.m.LoadOrStore(sec, signature.NewKey(raw))
		if !loaded && c.n.Add(1) > maxCachedKeys {
			c.evictOne(sec)
		}
		dst = append(dst, k.(*signature.Key))
	}
	return dst, nil
}

// evictOne deletes one entry other than keep.
func (c *keyCache) evictOne(keep string) {
	c.m.Range(func(k, _ any) bool {
		if k.(string) == keep {
			return true
		}
		if _, deleted := c.m.LoadAndDelete(k); deleted {
			c.n.Add(-1)
			return false
		}
		return true
	})
}

// len is the number of cached keys.
func (c *keyCache) len() int { return int(c.n.Load()) }
