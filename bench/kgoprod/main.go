// Command kgoprod is the franz-go peer of the benchmark (make bench, docs/benchmarks.md): it
// reads lines from standard input and produces each as one record (the line without its
// newline as the value, no key, no headers) with github.com/twmb/franz-go/pkg/kgo, then exits
// 0 once every record is acknowledged, 1 if any failed.
//
//	kgoprod --brokers 127.0.0.1:9092 --topic T -X acks=all -X linger.ms=5 < lines.txt
//
// Producer properties take their Java names, mapped onto kgo options:
//
//	acks                 all|-1, 1, 0           RequiredAcks
//	enable.idempotence   true|false             (false: DisableIdempotentWrite)
//	linger.ms            N                      ProducerLinger
//	batch.size           N                      ProducerBatchMaxBytes
//	compression.type     none|lz4|zstd|snappy|gzip  ProducerBatchCompression
//	buffer.memory        N (default 33554432)   MaxBufferedBytes (records capped at 1<<20)
//	max.request.size     N                      BrokerMaxWriteBytes(N): kgo then caps a batch,
//	                                            and a request, at N as Java does (kgo's own
//	                                            default is 100 MiB); a record larger than N is
//	                                            refused here
//
// It is written the way a careful kgo user would write it: values are copied out of the
// reader's buffer into 1 MiB slabs and records come from slices, so the program itself adds
// few allocations per record; kgo's own work is what is measured.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type props map[string]string

func (p props) String() string { return fmt.Sprint(map[string]string(p)) }
func (p props) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", s)
	}
	p[strings.TrimSpace(k)] = strings.TrimSpace(v)
	return nil
}

func main() {
	os.Exit(run())
}

func run() int {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma separated")
	topic := flag.String("topic", "", "topic")
	quiet := flag.Bool("q", false, "print nothing on success")
	p := props{}
	flag.Var(p, "X", "producer property key=value (Java name; repeatable)")
	flag.Parse()
	if *topic == "" {
		fmt.Fprintln(os.Stderr, "kgoprod: --topic is required")
		return 2
	}
	opts, maxRecord, err := options(p)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kgoprod:", err)
		return 2
	}
	opts = append(opts,
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.DefaultProduceTopic(*topic),
		kgo.ClientID("kgoprod"),
		kgo.AllowAutoTopicCreation(), // like the Java client's allow.auto.create.topics=true
	)
	if os.Getenv("KGOPROD_DEBUG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kgoprod:", err)
		return 2
	}
	defer cl.Close()

	var (
		acked, failed atomic.Int64
		firstErr      atomic.Pointer[error]
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			if failed.Add(1) == 1 {
				firstErr.Store(&err)
			}
			return
		}
		acked.Add(1)
	}

	ctx := context.Background()
	start := time.Now()
	r := bufio.NewReaderSize(os.Stdin, 1<<20)
	const slabSize = 1 << 20
	var (
		slab  []byte
		recs  []kgo.Record
		read  int64
		rerr  error
		lines int64
	)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the reader's buffer: gather it whole.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 0 {
			v := line
			if v[len(v)-1] == '\n' {
				v = v[:len(v)-1]
			}
			if len(v) > maxRecord {
				fmt.Fprintf(os.Stderr, "kgoprod: line %d is %d bytes, larger than max.request.size\n", lines+1, len(v))
				return 1
			}
			if len(v) > slabSize/4 {
				v = append([]byte(nil), v...)
			} else {
				if len(slab)+len(v) > cap(slab) {
					slab = make([]byte, 0, slabSize)
				}
				off := len(slab)
				slab = append(slab, v...)
				v = slab[off:len(slab):len(slab)]
			}
			if len(recs) == 0 {
				recs = make([]kgo.Record, 4096)
			}
			rec := &recs[0]
			recs = recs[1:]
			rec.Value = v
			cl.Produce(ctx, rec, done)
			lines++
			read += int64(len(line))
		}
		if err != nil {
			if err != io.EOF {
				rerr = err
			}
			break
		}
	}
	if err := cl.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "kgoprod: flush:", err)
		return 1
	}
	el := time.Since(start)
	if rerr != nil {
		fmt.Fprintln(os.Stderr, "kgoprod: reading stdin:", rerr)
		return 1
	}
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "kgoprod: %d of %d records failed; first error: %v\n", n, lines, *firstErr.Load())
		return 1
	}
	if !*quiet {
		fmt.Fprintf(os.Stderr, "kgoprod: %d records (%d bytes) acknowledged in %v: %.0f records/s\n",
			acked.Load(), read, el.Round(time.Millisecond), float64(acked.Load())/el.Seconds())
	}
	return 0
}

// options maps Java producer properties onto kgo options.
func options(p props) ([]kgo.Opt, int, error) {
	opts := []kgo.Opt{
		kgo.MaxBufferedBytes(32 << 20), // buffer.memory's default
		kgo.MaxBufferedRecords(1 << 20),
	}
	maxRecord := 1 << 20
	for k, v := range p {
		n, nerr := strconv.Atoi(v)
		num := func() error {
			if nerr != nil {
				return fmt.Errorf("%s=%q: want a number", k, v)
			}
			return nil
		}
		switch k {
		case "acks":
			switch v {
			case "all", "-1":
				opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
			case "1":
				opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
			case "0":
				opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
			default:
				return nil, 0, fmt.Errorf("acks=%q: want all, -1, 1 or 0", v)
			}
		case "enable.idempotence":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, 0, fmt.Errorf("enable.idempotence=%q: %v", v, err)
			}
			if !b {
				opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
			}
		case "linger.ms":
			if err := num(); err != nil {
				return nil, 0, err
			}
			opts = append(opts, kgo.ProducerLinger(time.Duration(n)*time.Millisecond))
		case "batch.size":
			if err := num(); err != nil {
				return nil, 0, err
			}
			opts = append(opts, kgo.ProducerBatchMaxBytes(int32(n)))
		case "buffer.memory":
			if err := num(); err != nil {
				return nil, 0, err
			}
			opts = append(opts, kgo.MaxBufferedBytes(n))
		case "max.request.size":
			if err := num(); err != nil {
				return nil, 0, err
			}
			maxRecord = n
			// The request cap as the Java client and the agent have it: kgo's write limit
			// bounds each produce request, and each batch to what fits in one.
			opts = append(opts, kgo.BrokerMaxWriteBytes(int32(n)))
		case "compression.type":
			var c kgo.CompressionCodec
			switch v {
			case "none":
				c = kgo.NoCompression()
			case "lz4":
				c = kgo.Lz4Compression()
			case "zstd":
				c = kgo.ZstdCompression()
			case "snappy":
				c = kgo.SnappyCompression()
			case "gzip":
				c = kgo.GzipCompression()
			default:
				return nil, 0, fmt.Errorf("compression.type=%q: want none, lz4, zstd, snappy or gzip", v)
			}
			opts = append(opts, kgo.ProducerBatchCompression(c))
		default:
			return nil, 0, fmt.Errorf("unsupported producer property %q", k)
		}
	}
	return opts, maxRecord, nil
}
