package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// NotCompactedError says a topic that must be compacted exists with another cleanup.policy.
type NotCompactedError struct {
	Topic, Policy string
}

func (e *NotCompactedError) Error() string {
	return fmt.Sprintf("topic %q has cleanup.policy=%s, not compact: its records would expire (or grow without bound); "+
		"set cleanup.policy=compact on it (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact) "+
		"or name another topic", e.Topic, e.Policy, e.Topic)
}

// EnsureCompactedTopic creates topic with one partition, the broker's default replication
// factor and cleanup.policy=compact, unless it exists; an existing topic must be compacted
// (a *NotCompactedError otherwise). created reports whether this call created it.
func (c *Client) EnsureCompactedTopic(ctx context.Context, topic string) (created bool, err error) {
	err = c.do(ctx, "CreateTopics "+topic, func() error {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 30000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = topic
		rt.NumPartitions = 1
		rt.ReplicationFactor = -1 // the broker's default.replication.factor
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "cleanup.policy", kmsg.StringPtr("compact")
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
		if _, err := onlyEntry(ctx, c, req, "CreateTopics "+topic, "topics",
			func(r kmsg.Response) []kmsg.CreateTopicsResponseTopic { return r.(*kmsg.CreateTopicsResponse).Topics },
			func(t kmsg.CreateTopicsResponseTopic) (int16, *string) { return t.ErrorCode, t.ErrorMessage }); err != nil {
			return err
		}
		created = true
		return nil
	})
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, kerr.TopicAlreadyExists):
		return false, fmt.Errorf("create topic %q: %w", topic, err)
	}
	policy, err := c.cleanupPolicy(ctx, topic)
	if err != nil {
		return false, err
	}
	if !strings.Contains(policy, "compact") {
		return false, &NotCompactedError{Topic: topic, Policy: policy}
	}
	return false, nil
}

// cleanupPolicy returns topic's cleanup.policy (DescribeConfigs).
func (c *Client) cleanupPolicy(ctx context.Context, topic string) (string, error) {
	var policy string
	err := c.do(ctx, "DescribeConfigs "+topic, func() error {
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeTopic
		r.ResourceName = topic
		r.ConfigNames = []string{"cleanup.policy"}
		req.Resources = append(req.Resources, r)
		res, err := onlyEntry(ctx, c, req, "DescribeConfigs "+topic, "resources",
			func(r kmsg.Response) []kmsg.DescribeConfigsResponseResource {
				return r.(*kmsg.DescribeConfigsResponse).Resources
			},
			func(r kmsg.DescribeConfigsResponseResource) (int16, *string) { return r.ErrorCode, nil })
		if err != nil {
			return err
		}
		for _, cfg := range res.Configs {
			if cfg.Name == "cleanup.policy" && cfg.Value != nil {
				policy = *cfg.Value
				return nil
			}
		}
		return fmt.Errorf("DescribeConfigs %s: no cleanup.policy in the response", topic)
	})
	if err != nil {
		return "", fmt.Errorf("topic %q: reading cleanup.policy: %w", topic, err)
	}
	return policy, nil
}

// onlyEntry sends req, a request about one topic, to any node and returns the one entry of the
// response that entries lists, or an error: the round trip's; one that names the request (what)
// and counts its entries (noun) when the response holds another number of them; or the error of
// the entry's code (from errorOf), with the broker's message when errorOf gives one.
func onlyEntry[E any](ctx context.Context, c *Client, req kmsg.Request, what, noun string,
	entries func(kmsg.Response) []E, errorOf func(E) (code int16, message *string)) (E, error) {
	var none E
	resp, err := c.roundTrip(ctx, anyNode, req)
	if err != nil {
		return none, err
	}
	es := entries(resp)
	if len(es) != 1 {
		return none, fmt.Errorf("%s: %d %s in the response", what, len(es), noun)
	}
	code, msg := errorOf(es[0])
	if err := kerr.ErrorForCode(code); err != nil {
		if msg != nil && *msg != "" {
			return none, fmt.Errorf("%w: %s", err, *msg)
		}
		return none, err
	}
	return es[0], nil
}
