package producer

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/kafkatrail/kafkatrail/internal/kafkatest"
	"github.com/kafkatrail/kafkatrail/internal/mskiam"
	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/network"
)

// awsMSKOAuthConfig is a Java client's configuration for MSK IAM over OAUTHBEARER, as AWS
// documents it.
func awsMSKOAuthConfig(c *Config) {
	c.SecurityProtocol, c.SASLMechanism = "SASL_PLAINTEXT", "OAUTHBEARER"
	c.SASLJAASConfig = jaasOAuthBearerModule + " required;"
	c.SASLLoginCallbackHandlerClass = mskiam.OAuthBearerLoginCallbackHandler
}

// TestRealBrokerAWSMSKIAM: with the AWS credentials of the environment, the producer gets its
// OAUTHBEARER tokens from AWS's MSK IAM signer and the broker's MSKIAM listener (which checks
// the SigV4 signature as Amazon MSK does) takes them: the records are delivered. With a wrong
// secret key the broker refuses the token: the records fail fast with an error that names
// OAUTHBEARER and the broker's answer, and holds no secret.
func TestRealBrokerAWSMSKIAM(t *testing.T) {
	bootstrap, accessKey, secretKey := kafkatest.MSKIAM(t)
	topic := kafkatest.NewTopic(t, 1)

	testkit.IsolateAWS(t, "AWS_ACCESS_KEY_ID", accessKey, "AWS_SECRET_ACCESS_KEY", secretKey, "AWS_REGION", "us-east-1")
	p := newTestProducer(t, []string{bootstrap}, awsMSKOAuthConfig)
	mustProduceAll(t, p, topic, makeRecords(20, 10), 30*time.Second)
	if got := len(kafkatest.Consume(t, topic, 20, 30*time.Second)); got != 20 {
		t.Fatalf("%d records in the topic, want 20", got)
	}
	if st, ok := p.SASLStats(); !ok || st.TokenFetches < 1 || st.Authentications < 1 {
		t.Fatalf("SASL stats %+v, want a token fetched and a connection authenticated", st)
	}

	const wrong = "not-the-secret-key-never-printed"
	testkit.IsolateAWS(t, "AWS_ACCESS_KEY_ID", accessKey, "AWS_SECRET_ACCESS_KEY", wrong, "AWS_REGION", "us-east-1")
	bad := newTestProducer(t, []string{bootstrap}, func(c *Config) {
		awsMSKOAuthConfig(c)
		c.DeliveryTimeoutMs, c.RequestTimeoutMs, c.LingerMs = 10_000, 5_000, 0
	})
	start := time.Now()
	res := produceAll(t, bad, topic, makeRecords(1, 10), 30*time.Second)
	err := res.firstError()
	var authErr *network.AuthenticationError
	if !errors.As(err, &authErr) || authErr.Mechanism != network.SASLOAuthBearer || !strings.Contains(err.Error(), "invalid_token") ||
		!strings.Contains(err.Error(), "access key "+accessKey) {
		t.Fatalf("with a wrong secret key: %v, want an OAUTHBEARER authentication error with the broker's invalid_token", err)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("the refused token failed the record after %v, want fast (before delivery.timeout.ms)", d)
	}
	for _, s := range []string{wrong, secretKey} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("the error holds a secret: %v", err)
		}
	}
	t.Logf("refused: %v", err)
}

// TestRealBrokerMSKIAMListenerRefusesATamperedToken: the broker's check is a real one. A
// token from AWS's signer for the test key pair logs a franz-go client in; the same token with
// its signature's last character changed, or another action, does not.
func TestRealBrokerMSKIAMListenerRefusesATamperedToken(t *testing.T) {
	bootstrap, accessKey, secretKey := kafkatest.MSKIAM(t)
	s := mskiam.NewStaticSession(credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""), "eu-west-3", "kafkatrail-test")
	tok, _, err := s.OAuthToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	resign := func(f func(string) string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(f(string(raw))))
	}
	flipLast := func(u string) string {
		i := strings.Index(u, "X-Amz-Signature=") + len("X-Amz-Signature=") + 63
		c := byte('0')
		if u[i] == '0' {
			c = '1'
		}
		return u[:i] + string(c) + u[i+1:]
	}
	for _, c := range []struct {
		name  string
		token string
		ok    bool
	}{
		{"as signed", tok, true},
		{"signature changed", resign(flipLast), false},
		{"another action", resign(func(u string) string {
			return strings.Replace(u, "kafka-cluster%3AConnect", "kafka-cluster%3AAlterCluster", 1)
		}), false},
	} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			return oauth.Auth{Token: c.token}, nil
		})))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = cl.Ping(ctx)
		cancel()
		cl.Close()
		if (err == nil) != c.ok {
			t.Fatalf("%s: login error %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// TestRealBrokerAWSMSKIAMMechanism: sasl.mechanism=AWS_MSK_IAM, as a Java client configures
// aws-msk-iam-auth, runs the exchange of internal/mskiam (its payload is the Java library's
// byte for byte: internal/mskiam's tests); the test broker has no AWS_MSK_IAM server, so the
// handshake is refused, and the error names the mechanism and what the broker offers.
func TestRealBrokerAWSMSKIAMMechanism(t *testing.T) {
	bootstrap, accessKey, secretKey := kafkatest.MSKIAM(t)
	testkit.IsolateAWS(t, "AWS_ACCESS_KEY_ID", accessKey, "AWS_SECRET_ACCESS_KEY", secretKey, "AWS_REGION", "us-east-1")
	p := newTestProducer(t, []string{bootstrap}, func(c *Config) {
		c.SecurityProtocol, c.SASLMechanism = "SASL_PLAINTEXT", "AWS_MSK_IAM"
		c.SASLJAASConfig = mskiam.LoginModule + " required;"
		c.SASLClientCallbackHandlerClass = mskiam.ClientCallbackHandler
		c.DeliveryTimeoutMs, c.RequestTimeoutMs, c.LingerMs = 10_000, 5_000, 0
	})
	err := produceAll(t, p, kafkatest.NewTopic(t, 1), makeRecords(1, 10), 30*time.Second).firstError()
	var authErr *network.AuthenticationError
	if !errors.As(err, &authErr) || authErr.Mechanism != mskiam.Mechanism || !strings.Contains(err.Error(), "OAUTHBEARER") {
		t.Fatalf("%v, want an AWS_MSK_IAM authentication error naming the broker's mechanisms", err)
	}
	t.Logf("%v", err)
}
