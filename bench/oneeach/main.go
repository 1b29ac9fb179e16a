// oneeach produces one record into each partition of the given topics with franz-go (kgo) and
// prints how long it took, for bench/peers_bench.py's one-each phase (issue 23).
//
//	oneeach [-no-idempotence] [-handshake] [-max-version 4.3] BOOTSTRAP TOPIC:PARTITIONS [TOPIC:PARTITIONS ...]
//
// The topics must exist. Off the clock, the client connects, gets its producer id (idempotent by
// default, as franz-go is) and every topic's metadata by producing one record into partition 0 of
// each topic. On the clock: one Produce call per partition (a record of one byte, acks=all, franz-go's
// other defaults), then Flush, until the last record's acknowledgement. franz-go sends one Produce
// request per broker carrying every partition that has data (up to its request size limit), so this
// measures the broker's own cost of a many-partition request rather than a client's per-request cost.
// -handshake prints "ready" after the warm-up and waits for a line on stdin before the clock starts
// (the caller reads the broker's CPU time or attaches a profiler there). -max-version caps the request versions at a Kafka release's (kversion.FromString), for a broker
// that closes the connection on franz-go's newest ApiVersions request instead of answering it
// UNSUPPORTED_VERSION (Tansu 0.6 with v5, sent from franz-go's 4.4 on: -max-version 4.3).
//
// Prints one JSON line: {"records": N, "seconds": S, "produce_requests": R, "produce_bytes": B,
// "produce_e2e_seconds": E, "idempotent": true, "errors": 0, "first_error": ""}: R and B count the
// Produce requests written during the clock and their bytes, E is the sum of their write-to-response
// times (franz-go's broker E2E hook). Exit status 1 if any record failed.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
)

// produceCounter is a kgo hook counting Produce requests (API key 0) while on is set.
type produceCounter struct {
	on       atomic.Bool
	requests atomic.Int64
	bytes    atomic.Int64
	e2e      atomic.Int64 // nanoseconds
}

func (c *produceCounter) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key != 0 || !c.on.Load() {
		return
	}
	c.requests.Add(1)
	c.bytes.Add(int64(e2e.BytesWritten))
	c.e2e.Add(int64(e2e.DurationE2E()))
}

type result struct {
	Records          int     `json:"records"`
	Seconds          float64 `json:"seconds"`
	ProduceRequests  int64   `json:"produce_requests"`
	ProduceBytes     int64   `json:"produce_bytes"`
	ProduceE2ESecond float64 `json:"produce_e2e_seconds"`
	Idempotent       bool    `json:"idempotent"`
	Errors           int64   `json:"errors"`
	FirstError       string  `json:"first_error"`
}

type target struct {
	topic      string
	partitions int32
}

func parseTargets(args []string) ([]target, error) {
	var out []target
	for _, a := range args {
		i := strings.LastIndexByte(a, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want TOPIC:PARTITIONS", a)
		}
		n, err := strconv.ParseInt(a[i+1:], 10, 32)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: bad partition count", a)
		}
		out = append(out, target{a[:i], int32(n)})
	}
	return out, nil
}

func run() error {
	noIdempotence := flag.Bool("no-idempotence", false, "disable franz-go's idempotent producer (default on)")
	maxVersion := flag.String("max-version", "", "cap request versions at this Kafka release's, e.g. 3.9")
	handshake := flag.Bool("handshake", false, "after the warm-up print \"ready\" and wait for a line on stdin")
	timeout := flag.Duration("timeout", 300*time.Second, "give up after this long (warm-up and clock each)")
	flag.Parse()
	if flag.NArg() < 2 {
		return fmt.Errorf("usage: oneeach [-no-idempotence] [-max-version V] BOOTSTRAP TOPIC:PARTITIONS ...")
	}
	targets, err := parseTargets(flag.Args()[1:])
	if err != nil {
		return err
	}
	total := 0
	for _, t := range targets {
		total += int(t.partitions)
	}
	hook := &produceCounter{}
	opts := []kgo.Opt{
		kgo.SeedBrokers(flag.Arg(0)),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		// the whole burst fits the buffer (default 10,000 records), so Produce never blocks on it
		kgo.MaxBufferedRecords(max(total, 10_000)),
		// a loaded machine: the broker gets a minute per request rather than 10 s
		kgo.ProduceRequestTimeout(60 * time.Second),
		kgo.WithHooks(hook),
	}
	if *noIdempotence {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if *maxVersion != "" {
		v := kversion.FromString(*maxVersion)
		if v == nil {
			return fmt.Errorf("-max-version %q: not a Kafka release franz-go knows", *maxVersion)
		}
		opts = append(opts, kgo.MaxVersions(v))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	warm := make([]*kgo.Record, 0, len(targets))
	for _, t := range targets {
		warm = append(warm, &kgo.Record{Topic: t.topic, Partition: 0, Value: []byte("w")})
	}
	if err := cl.ProduceSync(ctx, warm...).FirstErr(); err != nil {
		return fmt.Errorf("warm-up produce: %w", err)
	}

	if *handshake {
		fmt.Println("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("handshake: %w", err)
		}
	}

	recs := make([]*kgo.Record, 0, total)
	for _, t := range targets {
		for p := int32(0); p < t.partitions; p++ {
			recs = append(recs, &kgo.Record{Topic: t.topic, Partition: p, Value: []byte("x")})
		}
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), *timeout)
	defer cancel2()
	var (
		wg       sync.WaitGroup
		errs     atomic.Int64
		firstErr atomic.Value
	)
	wg.Add(len(recs))
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			if errs.Add(1) == 1 {
				firstErr.Store(err.Error())
			}
		}
		wg.Done()
	}
	hook.on.Store(true)
	t0 := time.Now()
	for _, r := range recs {
		cl.Produce(ctx2, r, done)
	}
	if err := cl.Flush(ctx2); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	wg.Wait()
	elapsed := time.Since(t0)
	hook.on.Store(false)

	res := result{
		Records:          len(recs),
		Seconds:          elapsed.Seconds(),
		ProduceRequests:  hook.requests.Load(),
		ProduceBytes:     hook.bytes.Load(),
		ProduceE2ESecond: time.Duration(hook.e2e.Load()).Seconds(),
		Idempotent:       !*noIdempotence,
		Errors:           errs.Load(),
	}
	if s, ok := firstErr.Load().(string); ok {
		res.FirstError = s
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("%d of %d records failed, the first: %s", res.Errors, res.Records, res.FirstError)
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "oneeach:", err)
		os.Exit(1)
	}
}
