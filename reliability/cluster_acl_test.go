package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// aclWait is how long scenario o's clients run without permission to write.
const aclWait = 8 * time.Second

// clusterACLLate: both clients log in as the cluster's SASL user, who may describe the topic
// but not write to it (no WRITE on any topic, no IDEMPOTENT_WRITE on the cluster), so the
// idempotent producer's InitProducerId is refused with CLUSTER_AUTHORIZATION_FAILED. After
// aclWait, WRITE on the topic is granted (which implies IDEMPOTENT_WRITE, KIP-679). Java's
// producer fails the records it holds and asks again (KIP-679: the refusal is abortable, no
// longer fatal), so it recovers, reporting those records failed. The agent follows a file, as
// `agent --tail` does: it holds the lines (an authorization refusal stops its input until a
// probe gets through) and loses none. (A stdin line that meets a refusal fails, as Java's do.)
// Recovery: from the grant to the first record after.
func clusterACLLate(t *testing.T, c *cluster) {
	const rate = 500
	jaas := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s";`,
		c.saslUser, c.saslPassword)
	props := []string{"security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN", "sasl.jaas.config=" + jaas}
	p := newPair(t, c, fmt.Sprintf("o. an ACL granted late: SASL user with DESCRIBE only on the topic for %v (InitProducerId refused: "+
		"CLUSTER_AUTHORIZATION_FAILED), then WRITE granted; %d lines/s", aclWait, rate),
		rotatedAssignment(3, 0), nil, clientSpec{props: props, bootstrap: c.sasl, follow: true}, nil)
	principal := "User:" + c.saslUser
	grant := func(ops ...kadm.ACLOperation) {
		t.Helper()
		topics := []string{p.topics["agent"], p.topics["Java"]}
		b := kadm.NewACLs().Allow(principal).Topics(topics...).ResourcePatternType(kadm.ACLPatternLiteral).Operations(ops...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := c.admin(t).CreateACLs(ctx, b)
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = fmt.Errorf("%s %v on %s: %w", r.Principal, r.Operation, r.Name, r.Err)
					break
				}
			}
		}
		if err != nil {
			t.Fatalf("granting %v: %v", ops, err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b := kadm.NewACLs().Allow(principal).AllowHosts().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny)
		if _, err := c.admin(t).DeleteACLs(ctx, b); err != nil {
			t.Logf("deleting %s's ACLs: %v", principal, err)
		}
	})
	grant(kadm.OpDescribe)
	p.start()
	p.f.pace(rate)
	hold(aclWait)
	for _, k := range p.kinds {
		if n := c.access().watch(t, p.topics[k]).get(); n != 0 {
			t.Fatalf("%s: %d records written without WRITE", k, n)
		}
	}
	grant(kadm.OpWrite)
	granted := time.Now()
	hold(5 * time.Second)
	p.finish(expect{
		exits:      []int{0, 1}, // Java's: 1 when it failed records it held while refused
		agentExits: []int{0},
		mayFail:    func(cc *clusterClient, i int) bool { return cc.kind == "Java" },
		recovery: func(cc *clusterClient, kc *keyedCount, _ clientOutcome) string {
			first, ok := kc.firstAfter(granted, []int32{0, 1, 2})
			return sinceOr(first, ok, granted)
		},
		check: func(cc *clusterClient, kc *keyedCount, out clientOutcome, r *crow) bool {
			if _, ok := kc.firstAfter(granted, []int32{0, 1, 2}); !ok {
				r.note("nothing written after the grant")
				return false
			}
			if cc.kind == "agent" {
				l := cc.process().log()
				named := strings.Contains(l, "CLUSTER_AUTHORIZATION_FAILED")
				r.note("held its lines while refused; the refusal named in its log: %v", named)
				return named
			}
			r.note("%s reported failed: %.140s", num(out.failed), out.firstError)
			return true
		},
	})
}
