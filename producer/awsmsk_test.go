package producer

import (
	"strings"
	"testing"

	"github.com/kafkatrail/kafkatrail/internal/mskiam"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
)

// TestAWSMSKIAMConfig: the properties a Java client writes for aws-msk-iam-auth are accepted
// in both forms and build the right exchange; what the library would not take is refused,
// naming the key.
func TestAWSMSKIAMConfig(t *testing.T) {
	testkit.IsolateAWS(t, "AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY", "secret", "AWS_REGION", "us-east-1")
	base := func(mutate func(*Config)) *Config {
		c := DefaultConfig()
		c.BootstrapServers = []string{"b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com:9098"}
		c.SecurityProtocol = "SASL_SSL"
		mutate(&c)
		return &c
	}
	iam := base(func(c *Config) {
		c.SASLMechanism = "AWS_MSK_IAM"
		c.SASLJAASConfig = mskiam.LoginModule + ` required awsRoleArn="arn:aws:iam::123456789012:role/writer" awsRoleSessionName="agent" awsDebugCreds=true;`
		c.SASLClientCallbackHandlerClass = mskiam.ClientCallbackHandler
	})
	if err := iam.Validate(); err != nil {
		t.Fatal(err)
	}
	nc, err := iam.networkConfig()
	if err != nil {
		t.Fatal(err)
	}
	if nc.SASL == nil || nc.SASL.Mechanism != "AWS_MSK_IAM" || nc.SASL.Exchange == nil || nc.SASL.OAuth != nil {
		t.Fatalf("AWS_MSK_IAM: SASL config %+v, want the mechanism with an exchange", nc.SASL)
	}
	oauth := base(awsMSKOAuthConfig)
	oauth.SecurityProtocol = "SASL_SSL"
	if err := oauth.Validate(); err != nil {
		t.Fatal(err)
	}
	nc, err = oauth.networkConfig()
	if err != nil {
		t.Fatal(err)
	}
	if nc.SASL.OAuth == nil || nc.SASL.OAuth.TokenSource == nil || nc.SASL.Exchange != nil {
		t.Fatalf("OAUTHBEARER with IAMOAuthBearerLoginCallbackHandler: %+v, want a token source", nc.SASL.OAuth)
	}

	for _, c := range []struct {
		name    string
		mutate  func(*Config)
		key     string
		message string
	}{
		{"another client callback handler", func(c *Config) {
			c.SASLMechanism = "AWS_MSK_IAM"
			c.SASLClientCallbackHandlerClass = "com.example.Handler"
		}, "sasl.client.callback.handler.class", "IAMClientCallbackHandler"},
		{"an option the library does not have", func(c *Config) {
			c.SASLMechanism = "AWS_MSK_IAM"
			c.SASLJAASConfig = mskiam.LoginModule + ` required awsRegion="us-east-1";`
		}, "sasl.jaas.config", "awsRegion"},
		{"a session name without a role", func(c *Config) {
			c.SASLMechanism = "AWS_MSK_IAM"
			c.SASLJAASConfig = mskiam.LoginModule + ` required awsRoleSessionName="s";`
		}, "sasl.jaas.config", "awsRoleArn"},
		{"the OAUTHBEARER module with AWS_MSK_IAM", func(c *Config) {
			c.SASLMechanism = "AWS_MSK_IAM"
			c.SASLJAASConfig = jaasOAuthBearerModule + ` required;`
		}, "sasl.jaas.config", mskiam.LoginModule},
	} {
		err := base(c.mutate).Validate()
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: %v, want %s: …%s…", c.name, err, c.key, c.message)
		}
	}
}
