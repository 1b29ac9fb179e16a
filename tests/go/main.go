// franzprobe drives franz-go (kgo, kadm) against a broker for the Python integration tests.
//
//	franzprobe BOOTSTRAP
//
// reads one JSON command per stdin line and answers each with exactly one JSON line on stdout:
// {"ok": true, ...} or {"ok": false, "error": "..."}. Group members are named clients that live
// across commands ("join" ... "poll"/"assignment"/"commit" ... "leave"). tests/support/franz.py
// builds and runs it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

type record struct {
	Topic     string   `json:"topic,omitempty"`
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Key       *string  `json:"key"`
	Value     string   `json:"value"`
	Headers   []header `json:"headers"`
	Timestamp int64    `json:"timestamp"`
}

type command struct {
	Op         string            `json:"op"`
	Topic      string            `json:"topic"`
	Topics     []string          `json:"topics"`
	Codec      string            `json:"codec"`
	Idempotent *bool             `json:"idempotent"`
	Records    []record          `json:"records"`
	Count      int               `json:"count"`
	TimeoutMs  int               `json:"timeout_ms"`
	Member     string            `json:"member"`
	Group      string            `json:"group"`
	Balancer   string            `json:"balancer"`
	Protocol   string            `json:"protocol"`
	Instance   string            `json:"instance"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs"`
	Groups     []string          `json:"groups"`
	Millis     int64             `json:"millis"`
	// transactions: a transactional id, the transactions to run, the consume-transform-produce
	// loop's output topic and abort period, and a consumer's isolation level
	TransactionalID string    `json:"transactional_id"`
	Transactions    []txnSpec `json:"transactions"`
	Out             string    `json:"out"`
	AbortEvery      int       `json:"abort_every"`
	MaxPoll         int       `json:"max_poll"`
	Isolation       string    `json:"isolation"`
}

// txnSpec is one transaction of a "transact" command: its records, then End "commit", "abort" or
// "open" (left open; a later "transact" by the same member continues it).
type txnSpec struct {
	Records []record `json:"records"`
	End     string   `json:"end"`
}

// txnProducer is a named transactional client that lives across "transact" commands.
type txnProducer struct {
	cl   *kgo.Client
	open bool
}

type member struct {
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[string]map[int32]bool
	events   []string
}

func (m *member) assignment() map[string][]int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]int32{}
	for t, ps := range m.assigned {
		for p := range ps {
			out[t] = append(out[t], p)
		}
		sort.Slice(out[t], func(i, j int) bool { return out[t][i] < out[t][j] })
	}
	return out
}

type probe struct {
	bootstrap string
	members   map[string]*member
	producers map[string]*txnProducer
}

// FRANZPROBE_LOG=debug|info logs kgo's decisions to stderr (the tests show stderr on failure).
func (p *probe) base() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(p.bootstrap), kgo.ClientID("franzprobe")}
	switch os.Getenv("FRANZPROBE_LOG") {
	case "debug":
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	case "info":
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	}
	return opts
}

func (p *probe) client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(p.base(), opts...)...)
}

func timeout(c *command, def int) time.Duration {
	if c.TimeoutMs > 0 {
		return time.Duration(c.TimeoutMs) * time.Millisecond
	}
	return time.Duration(def) * time.Millisecond
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", name)
}

func fromKgo(r *kgo.Record) record {
	out := record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value),
		Timestamp: r.Timestamp.UnixMilli(), Headers: []header{}}
	if r.Key != nil {
		k := string(r.Key)
		out.Key = &k
	}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, header{h.Key, string(h.Value)})
	}
	return out
}

func (p *probe) produce(ctx context.Context, c *command) (map[string]any, error) {
	cc, err := codec(c.Codec)
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{kgo.ProducerBatchCompression(cc), kgo.DefaultProduceTopic(c.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}
	if c.Idempotent != nil && !*c.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	cl, err := p.client(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rs := make([]*kgo.Record, 0, len(c.Records))
	for _, r := range c.Records {
		kr := &kgo.Record{Partition: r.Partition, Value: []byte(r.Value)}
		if r.Key != nil {
			kr.Key = []byte(*r.Key)
		}
		if r.Timestamp > 0 {
			kr.Timestamp = time.UnixMilli(r.Timestamp)
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
		}
		rs = append(rs, kr)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout(c, 30000))
	defer cancel()
	results := cl.ProduceSync(ctx, rs...)
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	// ProduceSync gives results in completion order; answer in the order the records were given
	offsets := make([][2]int64, len(rs))
	for i, r := range rs {
		offsets[i] = [2]int64{int64(r.Partition), r.Offset}
	}
	return map[string]any{"offsets": offsets}, nil
}

// poll collects up to count records from cl within the timeout.
func poll(ctx context.Context, cl *kgo.Client, count int, d time.Duration) ([]record, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	out := []record{}
	for len(out) < count {
		fs := cl.PollRecords(ctx, count-len(out))
		if ctx.Err() != nil {
			break
		}
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return out, fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, fromKgo(r)) })
	}
	return out, nil
}

func isolation(name string) (kgo.IsolationLevel, error) {
	switch name {
	case "", "read_uncommitted":
		return kgo.ReadUncommitted(), nil
	case "read_committed":
		return kgo.ReadCommitted(), nil
	}
	return kgo.ReadUncommitted(), fmt.Errorf("unknown isolation level %q", name)
}

func (p *probe) consume(ctx context.Context, c *command) (map[string]any, error) {
	iso, err := isolation(c.Isolation)
	if err != nil {
		return nil, err
	}
	cl, err := p.client(kgo.ConsumeTopics(c.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rs, err := poll(ctx, cl, c.Count, timeout(c, 20000))
	if err != nil {
		return nil, err
	}
	return map[string]any{"records": rs}, nil
}

func (p *probe) join(c *command) (map[string]any, error) {
	if _, ok := p.members[c.Member]; ok {
		return nil, fmt.Errorf("member %q exists", c.Member)
	}
	var bal kgo.GroupBalancer
	switch c.Balancer {
	case "", "cooperative-sticky":
		bal = kgo.CooperativeStickyBalancer()
	case "range":
		bal = kgo.RangeBalancer()
	case "sticky":
		bal = kgo.StickyBalancer()
	default:
		return nil, fmt.Errorf("unknown balancer %q", c.Balancer)
	}
	m := &member{assigned: map[string]map[int32]bool{}}
	opts := []kgo.Opt{
		kgo.ConsumerGroup(c.Group), kgo.ConsumeTopics(c.Topics...), kgo.Balancers(bal),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			defer m.mu.Unlock()
			for t, ps := range a {
				if m.assigned[t] == nil {
					m.assigned[t] = map[int32]bool{}
				}
				for _, p := range ps {
					m.assigned[t][p] = true
				}
			}
			m.events = append(m.events, "assigned")
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			m.drop(r, "revoked")
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { m.drop(r, "lost") }),
	}
	switch c.Protocol {
	case "", "classic":
	case "consumer":
		opts = append(opts, kgo.ServerSideBalancer())
	default:
		return nil, fmt.Errorf("unknown protocol %q", c.Protocol)
	}
	if c.Instance != "" {
		opts = append(opts, kgo.InstanceID(c.Instance))
	}
	cl, err := p.client(opts...)
	if err != nil {
		return nil, err
	}
	m.cl = cl
	p.members[c.Member] = m
	return map[string]any{}, nil
}

func (m *member) drop(r map[string][]int32, event string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for t, ps := range r {
		for _, p := range ps {
			delete(m.assigned[t], p)
		}
		if len(m.assigned[t]) == 0 {
			delete(m.assigned, t)
		}
	}
	m.events = append(m.events, event)
}

func (p *probe) member(c *command) (*member, error) {
	m, ok := p.members[c.Member]
	if !ok {
		return nil, fmt.Errorf("no member %q", c.Member)
	}
	return m, nil
}

func (p *probe) admin() (*kadm.Client, *kgo.Client, error) {
	cl, err := p.client()
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (p *probe) adminOp(ctx context.Context, c *command) (map[string]any, error) {
	adm, cl, err := p.admin()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout(c, 20000))
	defer cancel()
	switch c.Op {
	case "create_topics":
		configs := map[string]*string{}
		for k, v := range c.Configs {
			configs[k] = &v
		}
		rs, err := adm.CreateTopics(ctx, c.Partitions, -1, configs, c.Topics...)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for _, r := range rs.Sorted() {
			cfg := map[string]string{}
			for k, v := range r.Configs {
				cfg[k] = v.MaybeValue()
			}
			out[r.Topic] = map[string]any{"error": errText(r.Err), "partitions": r.NumPartitions,
				"replication_factor": r.ReplicationFactor, "id": r.ID.String(), "configs": cfg}
		}
		return map[string]any{"topics": out}, nil
	case "delete_topics":
		rs, err := adm.DeleteTopics(ctx, c.Topics...)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, r := range rs {
			out[r.Topic] = errText(r.Err)
		}
		return map[string]any{"topics": out}, nil
	case "list_topics":
		td, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, err
		}
		out := map[string]int{}
		for _, t := range td {
			out[t.Topic] = len(t.Partitions)
		}
		return map[string]any{"topics": out}, nil
	case "describe_topic_configs":
		rs, err := adm.DescribeTopicConfigs(ctx, c.Topics...)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for _, r := range rs {
			cfg := map[string]any{}
			for _, v := range r.Configs {
				cfg[v.Key] = map[string]any{"value": v.MaybeValue(), "source": v.Source.String()}
			}
			out[r.Name] = map[string]any{"error": errText(r.Err), "configs": cfg}
		}
		return map[string]any{"topics": out}, nil
	case "alter_topic_configs":
		var alters []kadm.AlterConfig
		for k, v := range c.Configs {
			v := v
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
		}
		rs, err := adm.AlterTopicConfigs(ctx, alters, c.Topics...)
		if err != nil {
			return nil, err
		}
		out := map[string]string{}
		for _, r := range rs {
			out[r.Name] = errText(r.Err)
		}
		return map[string]any{"topics": out}, nil
	case "list_groups":
		gs, err := adm.ListGroups(ctx)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for _, g := range gs.Sorted() {
			out[g.Group] = map[string]any{"state": g.State, "protocol_type": g.ProtocolType}
		}
		return map[string]any{"groups": out}, nil
	case "describe_groups":
		gs, err := adm.DescribeGroups(ctx, c.Groups...)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for name, g := range gs {
			members := []any{}
			for _, mem := range g.Members {
				assigned := map[string][]int32{}
				if a, ok := mem.Assigned.AsConsumer(); ok {
					for _, t := range a.Topics {
						assigned[t.Topic] = append(assigned[t.Topic], t.Partitions...)
					}
				}
				members = append(members, map[string]any{"member_id": mem.MemberID, "client_id": mem.ClientID,
					"instance_id": mem.InstanceID, "assigned": assigned})
			}
			out[name] = map[string]any{"error": errText(g.Err), "state": g.State, "protocol": g.Protocol,
				"protocol_type": g.ProtocolType, "members": members}
		}
		return map[string]any{"groups": out}, nil
	case "describe_consumer_groups":
		gs, err := adm.DescribeConsumerGroups(ctx, c.Groups...)
		if err != nil {
			return nil, err
		}
		out := map[string]any{}
		for name, g := range gs {
			members := []any{}
			for _, mem := range g.Members {
				assigned := map[string][]int32{}
				mem.Assignment.Each(func(t string, p int32) { assigned[t] = append(assigned[t], p) })
				for _, ps := range assigned {
					sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				}
				members = append(members, map[string]any{"member_id": mem.MemberID, "member_epoch": mem.MemberEpoch,
					"assigned": assigned})
			}
			out[name] = map[string]any{"error": errText(g.Err), "state": g.State, "epoch": g.Epoch,
				"assignor": g.AssignorName, "members": members}
		}
		return map[string]any{"groups": out}, nil
	case "fetch_offsets":
		rs, err := adm.FetchOffsets(ctx, c.Group)
		if err != nil {
			return nil, err
		}
		out := map[string]map[string]int64{}
		for t, ps := range rs {
			out[t] = map[string]int64{}
			for p, o := range ps {
				if o.Err != nil {
					return nil, o.Err
				}
				out[t][fmt.Sprint(p)] = o.At
			}
		}
		return map[string]any{"offsets": out}, nil
	case "list_offsets":
		var ls kadm.ListedOffsets
		switch {
		case c.Millis != 0:
			ls, err = adm.ListOffsetsAfterMilli(ctx, c.Millis, c.Topics...)
		case c.Codec == "start": // reuse of the string field: which end
			ls, err = adm.ListStartOffsets(ctx, c.Topics...)
		case c.Isolation == "read_committed": // the last stable offset
			ls, err = adm.ListCommittedOffsets(ctx, c.Topics...)
		default:
			ls, err = adm.ListEndOffsets(ctx, c.Topics...)
		}
		if err != nil {
			return nil, err
		}
		out := map[string]map[string]int64{}
		for t, ps := range ls {
			out[t] = map[string]int64{}
			for p, o := range ps {
				if o.Err != nil {
					return nil, o.Err
				}
				out[t][fmt.Sprint(p)] = o.Offset
			}
		}
		return map[string]any{"offsets": out}, nil
	}
	return nil, fmt.Errorf("unknown op %q", c.Op)
}

func (p *probe) do(ctx context.Context, c *command) (map[string]any, error) {
	switch c.Op {
	case "produce":
		return p.produce(ctx, c)
	case "consume":
		return p.consume(ctx, c)
	case "join":
		return p.join(c)
	case "poll":
		m, err := p.member(c)
		if err != nil {
			return nil, err
		}
		rs, err := poll(ctx, m.cl, c.Count, timeout(c, 10000))
		if err != nil {
			return nil, err
		}
		return map[string]any{"records": rs, "assignment": m.assignment()}, nil
	case "assignment":
		m, err := p.member(c)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		events := append([]string{}, m.events...)
		m.mu.Unlock()
		return map[string]any{"assignment": m.assignment(), "events": events}, nil
	case "commit":
		m, err := p.member(c)
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, timeout(c, 15000))
		defer cancel()
		if err := m.cl.CommitUncommittedOffsets(cctx); err != nil {
			return nil, err
		}
		out := map[string]map[string]int64{}
		for t, ps := range m.cl.CommittedOffsets() {
			out[t] = map[string]int64{}
			for p, o := range ps {
				out[t][fmt.Sprint(p)] = o.Offset
			}
		}
		return map[string]any{"committed": out}, nil
	case "transact":
		return p.transact(ctx, c)
	case "eos":
		return p.eos(ctx, c)
	case "leave":
		m, err := p.member(c)
		if err != nil {
			return nil, err
		}
		m.cl.Close()
		delete(p.members, c.Member)
		return map[string]any{}, nil
	}
	return p.adminOp(ctx, c)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: franzprobe BOOTSTRAP")
		os.Exit(2)
	}
	p := &probe{bootstrap: os.Args[1], members: map[string]*member{}, producers: map[string]*txnProducer{}}
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c command
		var res map[string]any
		err := json.Unmarshal(in.Bytes(), &c)
		if err == nil {
			res, err = p.do(ctx, &c)
		}
		if err != nil {
			res = map[string]any{"ok": false, "error": err.Error()}
		} else {
			res["ok"] = true
		}
		if err := out.Encode(res); err != nil {
			os.Exit(1)
		}
	}
	for _, m := range p.members {
		m.cl.Close()
	}
	for _, tp := range p.producers {
		tp.cl.Close()
	}
}

// kerrName is the Kafka error code name in err's chain ("PRODUCER_FENCED"), or "".
func kerrName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return ""
}

func toKgo(topic string, r record) *kgo.Record {
	kr := &kgo.Record{Topic: topic, Partition: r.Partition, Value: []byte(r.Value)}
	if r.Key != nil {
		kr.Key = []byte(*r.Key)
	}
	return kr
}

// transact runs c.Transactions with a transactional kgo client (kgo.TransactionalID): each begins
// (unless the member's transaction is still open), produces its records synchronously and ends as
// its End says. With c.Member the client lives on for later commands. Stops at the first error,
// which is reported (text and Kafka error name) in that transaction's result.
func (p *probe) transact(ctx context.Context, c *command) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout(c, 30000))
	defer cancel()
	tp := p.producers[c.Member]
	if tp == nil {
		cl, err := p.client(kgo.TransactionalID(c.TransactionalID), kgo.DefaultProduceTopic(c.Topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(60*time.Second))
		if err != nil {
			return nil, err
		}
		// as a long-lived application's client, it knows the broker's versions and features before
		// its first transaction (kgo decides at BeginTransaction whether to use KIP-890 part 2; a
		// client that has not yet talked to a broker runs its first transaction without it)
		if err := cl.Ping(ctx); err != nil {
			cl.Close()
			return nil, err
		}
		tp = &txnProducer{cl: cl}
		if c.Member != "" {
			p.producers[c.Member] = tp
		} else {
			defer cl.Close()
		}
	}
	results := []map[string]any{}
	for _, t := range c.Transactions {
		res := map[string]any{"offsets": [][2]int64{}, "error": "", "kerr": ""}
		results = append(results, res)
		fail := func(err error) {
			res["error"], res["kerr"] = err.Error(), kerrName(err)
		}
		if !tp.open {
			if err := tp.cl.BeginTransaction(); err != nil {
				fail(err)
				break
			}
			tp.open = true
		}
		rs := make([]*kgo.Record, 0, len(t.Records))
		for _, r := range t.Records {
			rs = append(rs, toKgo(c.Topic, r))
		}
		if err := tp.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			fail(err)
			if t.End != "open" { // what ending the failed transaction says (an abort)
				endErr := tp.cl.EndTransaction(ctx, kgo.TryAbort)
				res["end_error"], res["end_kerr"] = errText(endErr), kerrName(endErr)
				tp.open = endErr != nil // kgo keeps a transaction whose end failed open
			}
			break
		}
		offsets := [][2]int64{}
		for _, r := range rs {
			offsets = append(offsets, [2]int64{int64(r.Partition), r.Offset})
		}
		res["offsets"] = offsets
		if t.End == "open" {
			continue
		}
		if err := tp.cl.EndTransaction(ctx, kgo.TransactionEndTry(t.End == "commit")); err != nil {
			fail(err) // kgo keeps the transaction open: the caller may retry the end with an abort
			break
		}
		tp.open = false
	}
	out := map[string]any{"transactions": results}
	if id, epoch, err := tp.cl.ProducerID(ctx); err == nil {
		out["producer_id"], out["producer_epoch"] = id, epoch
	}
	return out, nil
}

// eos is a consume-transform-produce loop on a kgo.GroupTransactSession: it consumes c.Topic
// (read_committed) in group c.Group and, per poll of at most c.MaxPoll records, begins a
// transaction, produces "OUT-" + value to c.Out (same partition) and ends it, committing the
// consumed offsets, except every c.AbortEvery-th transaction, which it aborts (the session then
// rewinds to the committed offsets and the input is consumed again). It stops once the group's
// committed offsets reach c.Topic's end offsets (read when it starts).
func (p *probe) eos(ctx context.Context, c *command) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout(c, 60000))
	defer cancel()
	adm, admCl, err := p.admin()
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, c.Topic)
	admCl.Close()
	if err != nil {
		return nil, err
	}
	s, err := kgo.NewGroupTransactSession(append(p.base(),
		kgo.TransactionalID(c.TransactionalID), kgo.ConsumerGroup(c.Group), kgo.ConsumeTopics(c.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.SessionTimeout(10*time.Second),
		kgo.HeartbeatInterval(500*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	done := func() bool {
		committed := s.Client().CommittedOffsets()[c.Topic]
		for _, e := range ends.Offsets()[c.Topic] {
			if committed[e.Partition].Offset < e.At {
				return false
			}
		}
		return true
	}
	txns, commits, aborts := 0, 0, 0
	for !done() {
		fs := s.PollRecords(ctx, c.MaxPoll)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("after %d transactions: %w", txns, ctx.Err())
		}
		if err := fs.Err(); err != nil {
			return nil, err
		}
		if fs.Empty() {
			continue
		}
		if err := s.Begin(); err != nil {
			return nil, err
		}
		txns++
		var rs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			rs = append(rs, &kgo.Record{Topic: c.Out, Partition: r.Partition, Key: r.Key,
				Value: append([]byte("OUT-"), r.Value...)})
		})
		if err := s.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return nil, err
		}
		commit := txns%c.AbortEvery != 0
		committed, err := s.End(ctx, kgo.TransactionEndTry(commit))
		if err != nil {
			return nil, err
		}
		if committed {
			commits++
		} else {
			aborts++
		}
	}
	offsets := map[string]int64{}
	for part, o := range s.Client().CommittedOffsets()[c.Topic] {
		offsets[fmt.Sprint(part)] = o.Offset
	}
	return map[string]any{"transactions": txns, "commits": commits, "aborts": aborts, "committed": offsets}, nil
}
