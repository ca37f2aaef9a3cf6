package app

import (
	"net"
	"sync"
	"sync/atomic"
)

// unusedConns is a listener that knows which of its connections have not yet sent a
// byte. fasthttp counts a connection as active from its accept, while it waits for its
// first request's header (up to ReadTimeout), and its shutdown waits for every active
// connection: a client's connection dialled and never used (net/http's transport dials
// one when a request finds no idle connection, and pools it if another freed first)
// held a stop for the whole LOOM_SHUTDOWN_GRACE_MS. Such a connection carries no
// request, so the shutdown closes it (as net/http's does a new connection).
type unusedConns struct {
	net.Listener
	mu    sync.Mutex
	conns map[*watchedConn]struct{}
}

func newUnusedConns(ln net.Listener) *unusedConns {
	return &unusedConns{Listener: ln, conns: map[*watchedConn]struct{}{}}
}

func (l *unusedConns) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	w := &watchedConn{Conn: c, of: l}
	l.mu.Lock()
	l.conns[w] = struct{}{}
	l.mu.Unlock()
	return w, nil
}

// closeUnused closes the connections that have not sent a byte.
func (l *unusedConns) closeUnused() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if !c.used.Load() {
			c.Conn.Close()
			delete(l.conns, c)
		}
	}
}

// watchedConn is a connection that records its first byte read.
type watchedConn struct {
	net.Conn
	of   *unusedConns
	used atomic.Bool
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.used.Load() {
		c.used.Store(true)
		c.of.forget(c)
	}
	return n, err
}

func (c *watchedConn) Close() error {
	c.of.forget(c)
	return c.Conn.Close()
}

func (l *unusedConns) forget(c *watchedConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}
