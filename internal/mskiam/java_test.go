package mskiam

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/kafkatrail/kafkatrail/internal/javatest"
)

// The test credentials: AWS's documentation example keys, and a session token.
const (
	testAccessKey    = "AKIDEXAMPLE"
	testSecretKey    = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testSessionToken = "IQoJb3JpZ2luX2VjEXAMPLE-session-token/+="
)

// javaOracle compiles testdata/MskIamOracle.java against AWS's aws-msk-iam-auth (2.4.0, with
// the kafka-clients 4.4.0 it plugs into), resolved by Maven from testdata/pom.xml.
func javaOracle(t *testing.T) *javatest.Program {
	t.Helper()
	return javatest.Compile(t, javatest.MavenClasspath(t, "testdata/pom.xml"), "testdata/MskIamOracle.java")
}

func credsEnv(session bool, region string) []string {
	env := []string{"AWS_ACCESS_KEY_ID=" + testAccessKey, "AWS_SECRET_ACCESS_KEY=" + testSecretKey,
		"AWS_REGION=" + region, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent"}
	if session {
		env = append(env, "AWS_SESSION_TOKEN="+testSessionToken)
	}
	return env
}

func testCreds(session bool) aws.Credentials {
	c := aws.Credentials{AccessKeyID: testAccessKey, SecretAccessKey: testSecretKey}
	if session {
		c.SessionToken = testSessionToken
	}
	return c
}

// TestPayloadIsTheJavaLibrarys: the first AWS_MSK_IAM message for the same credentials, broker
// host and time is the one AWS's Java library sends (IAMSaslClient.evaluateChallenge, its
// AWS4SignedPayloadGenerator), byte for byte: the Java library signs at its own clock, and our
// payload is made for the x-amz-date and user-agent it wrote.
func TestPayloadIsTheJavaLibrarys(t *testing.T) {
	java := javaOracle(t)
	for _, c := range []struct {
		name    string
		host    string
		session bool
	}{
		{"provisioned, temporary credentials", "b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com", true},
		{"provisioned, long-term keys", "b-2.demo.abc123.c2.kafka.eu-west-1.amazonaws.com", false},
		{"serverless", "boot-abc123.c2.kafka-serverless.ap-southeast-2.amazonaws.com", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			region := RegionOfHost(c.host)
			want := strings.TrimSpace(java.Env(credsEnv(c.session, "us-east-1")...).Run(t, "MskIamOracle", "aws_msk_iam", c.host))
			var fields map[string]string
			if err := json.Unmarshal([]byte(want), &fields); err != nil {
				t.Fatalf("the Java payload %q: %v", want, err)
			}
			at, err := time.Parse("20060102T150405Z", fields["x-amz-date"])
			if err != nil {
				t.Fatal(err)
			}
			got, err := Payload(context.Background(), testCreds(c.session), c.host, region, fields["user-agent"], at)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Fatalf("payload\n%s\nthe Java library's\n%s", got, want)
			}
			if !strings.Contains(want, `"x-amz-credential":"`+testAccessKey+"/"+at.Format("20060102")+"/"+region+"/kafka-cluster/aws4_request") {
				t.Fatalf("the Java payload's credential scope is not for %s: %s", region, want)
			}
		})
	}
}

// TestOAuthTokenAgreesWithTheJavaLibrary: the OAUTHBEARER token AWS's Go signer makes and the
// one the Java library makes (IAMOAuthBearerLoginCallbackHandler) for the same credentials and
// region are the same presigned request: the same parameters but for their order, the user
// agent and the signing time, and a signature that verifies, recomputed at its own time, for
// each. AWS's two libraries differ in those three, so byte equality is not theirs to give.
func TestOAuthTokenAgreesWithTheJavaLibrary(t *testing.T) {
	java := javaOracle(t)
	const region = "us-west-2"
	javaToken := strings.TrimSpace(java.Env(credsEnv(true, region)...).Run(t, "MskIamOracle", "oauthbearer",
		"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"))
	s := NewStaticSession(credentials.StaticCredentialsProvider{Value: testCreds(true)}, region, "kafkatrail-test")
	ours, exp, err := s.OAuthToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < 14*time.Minute || d > 15*time.Minute+time.Second {
		t.Fatalf("token expires in %v, want 15 minutes", d)
	}
	jq, jsig := verifyToken(t, "the Java library's", javaToken, region, testCreds(true))
	oq, osig := verifyToken(t, "ours", ours, region, testCreds(true))
	if jsig == osig && jq.Get("X-Amz-Date") != oq.Get("X-Amz-Date") {
		t.Fatal("two signing times, one signature")
	}
	for _, q := range []url.Values{jq, oq} {
		for _, k := range []string{"X-Amz-Date", "X-Amz-Signature", "User-Agent"} {
			q.Del(k)
		}
		// The scope's date is the signing day's; both were signed within seconds.
		q.Set("X-Amz-Credential", strings.Join(slices.Delete(strings.Split(q.Get("X-Amz-Credential"), "/"), 1, 2), "/"))
	}
	if jq.Encode() != oq.Encode() {
		t.Fatalf("parameters\n%s\nthe Java library's\n%s", oq.Encode(), jq.Encode())
	}
}

// verifyToken decodes an OAUTHBEARER token (a base64url presigned URL of
// https://kafka.REGION.amazonaws.com), checks its host, action and algorithm, and that its
// signature is the one SigV4 gives for creds at its own X-Amz-Date; it returns its parameters
// and signature.
func verifyToken(t *testing.T, whose, token, region string, creds aws.Credentials) (url.Values, string) {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("%s token is not base64url: %v", whose, err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("%s token: %v", whose, err)
	}
	q := u.Query()
	if u.Host != "kafka."+region+".amazonaws.com" || q.Get("Action") != "kafka-cluster:Connect" || q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		t.Fatalf("%s token: %s", whose, raw)
	}
	if want := signatureAt(t, u.Host, region, q, creds); q.Get("X-Amz-Signature") != want {
		t.Fatalf("%s token's signature %s, SigV4 gives %s for %s", whose, q.Get("X-Amz-Signature"), want, raw)
	}
	return q, q.Get("X-Amz-Signature")
}

// signatureAt recomputes the SigV4 presigned signature of GET https://host/?Action=...&X-Amz-Expires=...
// at q's X-Amz-Date with creds: what a verifier holding the secret computes.
func signatureAt(t *testing.T, host, region string, q url.Values, creds aws.Credentials) string {
	t.Helper()
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "https", Host: host, Path: "/",
		RawQuery: url.Values{"Action": {q.Get("Action")}, "X-Amz-Expires": {q.Get("X-Amz-Expires")}}.Encode()}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, emptySHA256, "kafka-cluster", region, at)
	if err != nil {
		t.Fatal(err)
	}
	su, err := url.Parse(signed)
	if err != nil {
		t.Fatal(err)
	}
	return su.Query().Get("X-Amz-Signature")
}
