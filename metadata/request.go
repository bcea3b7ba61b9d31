package metadata

import "github.com/twmb/franz-go/pkg/kmsg"

// NewRequest builds the metadata request for topics. An empty topics list asks for brokers only:
// the list is sent empty, not null, because a null list means "every topic" to the broker.
// allowAutoCreate lets the broker create topics it does not know yet (auto.create.topics.enable
// on the broker side must agree).
func NewRequest(topics []string, allowAutoCreate bool) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	req.AllowAutoTopicCreation = allowAutoCreate
	return req
}
