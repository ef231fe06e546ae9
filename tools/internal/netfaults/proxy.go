// Package netfaults injects network faults between a DynamoDB client and
// DynamoDB (Local): a toxiproxy run in this process ([Proxy]) that can cut,
// slow down or drop the answers of the connections that go through it.
// Service errors injected with SDK middleware live in the root module's
// internal/faults, which the library's own tests use; this package is in the
// tools module so that the library's users do not inherit toxiproxy.
package netfaults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Proxy is a TCP proxy (toxiproxy, run in this process) listening on
// 127.0.0.1 in front of one upstream address. Clients that talk to
// [Proxy.Endpoint] instead of the upstream can be cut off, slowed down or
// have their answers dropped while other clients reach the upstream directly.
type Proxy struct {
	proxy *toxiproxy.Proxy

	mu     sync.Mutex
	closed bool
	toxics map[string]bool // names of the toxics now in place
	seq    atomic.Int64
}

var quietOnce sync.Once

// NewProxy starts a proxy on 127.0.0.1 (a free port) to upstream, given as
// host:port or as an http:// URL such as a DynamoDB Local endpoint.
func NewProxy(upstream string) (*Proxy, error) {
	hostPort, err := hostPortOf(upstream)
	if err != nil {
		return nil, err
	}
	// Some toxics log through zerolog's global logger; keep tests quiet.
	quietOnce.Do(func() { zerolog.SetGlobalLevel(zerolog.Disabled) })
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, "dynamodb", "127.0.0.1:0", hostPort)
	if err := p.Start(); err != nil {
		return nil, fmt.Errorf("netfaults: start proxy to %s: %w", hostPort, err)
	}
	return &Proxy{proxy: p, toxics: make(map[string]bool)}, nil
}

func hostPortOf(s string) (string, error) {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host, nil
	}
	if _, _, err := net.SplitHostPort(s); err != nil {
		return "", fmt.Errorf("netfaults: upstream %q is neither host:port nor a URL: %w", s, err)
	}
	return s, nil
}

// Addr is the proxy's listening address, 127.0.0.1:PORT. It stays the same
// across [Proxy.Refuse] and [Proxy.Heal].
func (p *Proxy) Addr() string {
	p.proxy.Lock()
	defer p.proxy.Unlock()
	return p.proxy.Listen
}

// Endpoint is the proxy's address as a URL for an SDK's BaseEndpoint.
func (p *Proxy) Endpoint() string { return "http://" + p.Addr() }

// Stream is the direction a toxic acts on.
type Stream string

// Upstream is client to server (requests); Downstream is server to client
// (responses).
const (
	Upstream   Stream = "upstream"
	Downstream Stream = "downstream"
)

// Toxic adds a toxiproxy toxic of type typ ("latency", "bandwidth",
// "timeout", "reset_peer", "limit_data", "slicer", "slow_close") with the
// given attributes to one stream, applied to each connection with
// probability toxicity (0 or 1 = always). It returns the toxic's name for
// [Proxy.Remove].
func (p *Proxy) Toxic(typ string, stream Stream, toxicity float32, attrs map[string]any) (string, error) {
	if toxicity == 0 {
		toxicity = 1
	}
	name := fmt.Sprintf("%s_%s_%d", typ, stream, p.seq.Add(1))
	body, err := json.Marshal(map[string]any{
		"name": name, "type": typ, "stream": string(stream), "toxicity": toxicity, "attributes": attrs,
	})
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return "", fmt.Errorf("netfaults: proxy closed")
	}
	if _, err := p.proxy.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		return "", fmt.Errorf("netfaults: add %s toxic: %w", typ, err)
	}
	p.toxics[name] = true
	return name, nil
}

// Remove removes the toxic named name.
func (p *Proxy) Remove(name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.toxics[name] {
		return nil
	}
	delete(p.toxics, name)
	if err := p.proxy.Toxics.RemoveToxic(context.Background(), name); err != nil {
		return fmt.Errorf("netfaults: remove toxic %s: %w", name, err)
	}
	return nil
}

// Cut makes the network silently drop everything in both directions:
// connections stay open (new ones are accepted) but no byte gets through,
// so clients see timeouts, not errors. [Proxy.Heal] ends it.
func (p *Proxy) Cut() error {
	if _, err := p.Toxic("timeout", Upstream, 1, map[string]any{"timeout": 0}); err != nil {
		return err
	}
	_, err := p.Toxic("timeout", Downstream, 1, map[string]any{"timeout": 0})
	return err
}

// DropResponses lets requests reach the server but drops every response:
// writes land, and the client sees a timeout. [Proxy.Heal] ends it.
func (p *Proxy) DropResponses() error {
	_, err := p.Toxic("timeout", Downstream, 1, map[string]any{"timeout": 0})
	return err
}

// ResetResponses lets requests reach the server and then resets each
// connection (TCP RST) instead of answering, after delay: writes land and
// the client sees "connection reset by peer". [Proxy.Heal] ends it.
func (p *Proxy) ResetResponses(delay time.Duration) error {
	_, err := p.Toxic("reset_peer", Downstream, 1, map[string]any{"timeout": delay.Milliseconds()})
	return err
}

// Latency delays every chunk of data in stream by d ± jitter.
func (p *Proxy) Latency(stream Stream, d, jitter time.Duration) (string, error) {
	return p.Toxic("latency", stream, 1, map[string]any{"latency": d.Milliseconds(), "jitter": jitter.Milliseconds()})
}

// Bandwidth limits stream to kbps kilobytes per second.
func (p *Proxy) Bandwidth(stream Stream, kbps int64) (string, error) {
	return p.Toxic("bandwidth", stream, 1, map[string]any{"rate": kbps})
}

// Refuse stops the proxy: open connections are closed and new ones refused
// (as if the server's host were down), until [Proxy.Heal].
func (p *Proxy) Refuse() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.proxy.Stop()
	}
}

// Heal removes every toxic and, after [Proxy.Refuse], listens again on the
// same address.
func (p *Proxy) Heal() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("netfaults: proxy closed")
	}
	for name := range p.toxics {
		_ = p.proxy.Toxics.RemoveToxic(context.Background(), name)
	}
	clear(p.toxics)
	if err := p.proxy.Start(); err != nil && err != toxiproxy.ErrProxyAlreadyStarted {
		return fmt.Errorf("netfaults: restart proxy on %s: %w", p.proxy.Listen, err)
	}
	return nil
}

// Close removes every toxic, stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.proxy.Toxics.ResetToxics(context.Background())
	p.proxy.Stop()
}

// Port returns the proxy's port.
func (p *Proxy) Port() int {
	_, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.Atoi(port)
	return n
}
