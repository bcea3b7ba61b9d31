package mskiam

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/kafkatrail/kafkatrail/internal/testkit"
	"github.com/kafkatrail/kafkatrail/network"
)

// fakeSTS answers AssumeRoleWithWebIdentity and AssumeRole as AWS STS does, with temporary
// credentials of its own, and keeps the requests' forms.
type fakeSTS struct {
	mu       sync.Mutex
	requests []url.Values
}

const (
	stsAccessKey    = "ASIASTSEXAMPLE"
	stsSecretKey    = "sts-secret-key-never-printed"
	stsSessionToken = "sts-session-token"
)

func (f *fakeSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, r.Form)
	f.mu.Unlock()
	action := r.Form.Get("Action")
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	w.Header().Set("Content-Type", "text/xml")
	fmt.Fprintf(w, `<%sResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><%sResult>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>%s</SecretAccessKey><SessionToken>%s</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/agent/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>
</%sResult><ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></%sResponse>`,
		action, action, stsAccessKey, stsSecretKey, stsSessionToken, exp, action, action)
}

func (f *fakeSTS) forms() []url.Values {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]url.Values(nil), f.requests...)
}

func startSTS(t *testing.T) (*fakeSTS, string) {
	t.Helper()
	f := &fakeSTS{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// tokenCredential returns the access key of an OAUTHBEARER token's credential scope, after
// checking that its signature verifies with creds.
func tokenAccessKey(t *testing.T, token, region string, creds aws.Credentials) string {
	t.Helper()
	q, _ := verifyToken(t, "the session's", token, region, creds)
	if creds.SessionToken != "" && q.Get("X-Amz-Security-Token") != creds.SessionToken {
		t.Fatalf("token's X-Amz-Security-Token %q, want %q", q.Get("X-Amz-Security-Token"), creds.SessionToken)
	}
	return strings.Split(q.Get("X-Amz-Credential"), "/")[0]
}

// TestWebIdentityOnEKS: on an EKS pod with IAM roles for service accounts (IRSA), the pod
// identity webhook sets AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE and AWS_REGION; the default
// chain exchanges the projected token for temporary credentials with STS (here a fake one on
// 127.0.0.1, by AWS_ENDPOINT_URL_STS), and the token is signed with them.
func TestWebIdentityOnEKS(t *testing.T) {
	testkit.IsolateAWS(t)
	sts, endpoint := startSTS(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.sig"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/log-agent")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", tokenFile)
	t.Setenv("AWS_REGION", "eu-west-1")
	t.Setenv("AWS_ENDPOINT_URL_STS", endpoint)
	s, err := NewSession(context.Background(), Options{}, "kafkatrail-test")
	if err != nil {
		t.Fatal(err)
	}
	if s.Region() != "eu-west-1" {
		t.Fatalf("region %q, want AWS_REGION's", s.Region())
	}
	tok, _, err := s.OAuthToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	temp := aws.Credentials{AccessKeyID: stsAccessKey, SecretAccessKey: stsSecretKey, SessionToken: stsSessionToken}
	if ak := tokenAccessKey(t, tok, "eu-west-1", temp); ak != stsAccessKey {
		t.Fatalf("token signed by %s, want STS's temporary key", ak)
	}
	forms := sts.forms()
	if len(forms) != 1 || forms[0].Get("Action") != "AssumeRoleWithWebIdentity" ||
		forms[0].Get("RoleArn") != "arn:aws:iam::123456789012:role/log-agent" ||
		!strings.Contains(forms[0].Get("WebIdentityToken"), "projected-service-account-token") {
		t.Fatalf("STS requests %v, want one AssumeRoleWithWebIdentity with the role and the projected token", forms)
	}
	// The credentials are cached until they near their expiry: a second token asks STS nothing.
	if _, _, err := s.OAuthToken(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(sts.forms()); n != 1 {
		t.Fatalf("%d STS requests for two tokens, want 1 (cached credentials)", n)
	}
}

// TestProfileAndAssumedRole: awsProfileName takes a profile of the shared credentials file
// ahead of the default chain's (environment) credentials; awsRoleArn assumes the role with
// STS (awsStsRegion's endpoint, the session name given) using the chain's credentials.
func TestProfileAndAssumedRole(t *testing.T) {
	testkit.IsolateAWS(t)
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[agent]\naws_access_key_id = AKIAPROFILEKEY\naws_secret_access_key = profile-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	t.Setenv("AWS_REGION", "us-east-2")

	s, err := NewSession(context.Background(), Options{Profile: "agent"}, "kafkatrail-test")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := s.OAuthToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if ak := tokenAccessKey(t, tok, "us-east-2", aws.Credentials{AccessKeyID: "AKIAPROFILEKEY", SecretAccessKey: "profile-secret"}); ak != "AKIAPROFILEKEY" {
		t.Fatalf("token signed by %s, want the profile's key", ak)
	}

	sts, endpoint := startSTS(t)
	t.Setenv("AWS_ENDPOINT_URL_STS", endpoint)
	s, err = NewSession(context.Background(), Options{RoleARN: "arn:aws:iam::123456789012:role/writer",
		RoleSessionName: "agent-7", STSRegion: "us-east-2"}, "kafkatrail-test")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err = s.OAuthToken(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	temp := aws.Credentials{AccessKeyID: stsAccessKey, SecretAccessKey: stsSecretKey, SessionToken: stsSessionToken}
	if ak := tokenAccessKey(t, tok, "us-east-2", temp); ak != stsAccessKey {
		t.Fatalf("token signed by %s, want the assumed role's key", ak)
	}
	forms := sts.forms()
	if len(forms) != 1 || forms[0].Get("Action") != "AssumeRole" || forms[0].Get("RoleSessionName") != "agent-7" ||
		forms[0].Get("RoleArn") != "arn:aws:iam::123456789012:role/writer" {
		t.Fatalf("STS requests %v, want one AssumeRole of the role, session agent-7", forms)
	}
}

// TestNoCredentials: with no credentials anywhere the token fails with an
// *network.AuthenticationError that names OAUTHBEARER and says no AWS credentials were found,
// and nothing secret; without a region it says that.
func TestNoCredentials(t *testing.T) {
	testkit.IsolateAWS(t)
	t.Setenv("AWS_REGION", "us-east-1")
	s, err := NewSession(context.Background(), Options{}, "kafkatrail-test")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.OAuthToken(context.Background())
	var authErr *network.AuthenticationError
	if !errors.As(err, &authErr) || authErr.Mechanism != network.SASLOAuthBearer || !strings.Contains(err.Error(), "no AWS credentials found") {
		t.Fatalf("error %v, want an OAUTHBEARER authentication error saying no AWS credentials were found", err)
	}
	t.Logf("%v", err)

	t.Setenv("AWS_REGION", "")
	os.Unsetenv("AWS_REGION")
	t.Setenv("AWS_ACCESS_KEY_ID", testAccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", testSecretKey)
	s, err = NewSession(context.Background(), Options{}, "kafkatrail-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OAuthToken(context.Background()); err == nil || !strings.Contains(err.Error(), "no AWS region") {
		t.Fatalf("error %v, want no AWS region", err)
	}
	// AWS_MSK_IAM takes the region from the broker's host.
	var sent []byte
	err = s.Authenticate(context.Background(), "b-1.demo.abc123.c2.kafka.sa-east-1.amazonaws.com", func(b []byte) ([]byte, error) {
		sent = b
		return []byte(`{"version":"2020_10_22","request-id":"r-1"}`), nil
	})
	if err != nil || !strings.Contains(string(sent), "/sa-east-1/kafka-cluster/aws4_request") {
		t.Fatalf("AWS_MSK_IAM with the region in the host: %v, sent %s", err, sent)
	}
	if strings.Contains(string(sent), testSecretKey) || strings.Contains(base64.StdEncoding.EncodeToString(sent), testSecretKey) {
		t.Fatal("the payload holds the secret key")
	}
	err = s.Authenticate(context.Background(), "b-1.demo.abc123.c2.kafka.sa-east-1.amazonaws.com", func([]byte) ([]byte, error) { return nil, nil })
	if !errors.As(err, &authErr) || authErr.Mechanism != Mechanism {
		t.Fatalf("an empty answer: %v, want an AWS_MSK_IAM authentication error", err)
	}
}

// TestRegionOfHost: the region is the host label that has a region's form.
func TestRegionOfHost(t *testing.T) {
	for host, want := range map[string]string{
		"b-1.demo.abc123.c2.kafka.us-east-1.amazonaws.com":          "us-east-1",
		"b-3.x.y.c12.kafka.eu-central-2.amazonaws.com":              "eu-central-2",
		"boot-abc.c2.kafka-serverless.ap-southeast-2.amazonaws.com": "ap-southeast-2",
		"b-1.gov.abc.c1.kafka.us-gov-west-1.amazonaws.com":          "us-gov-west-1",
		"b-1.cn.abc.c1.kafka.cn-north-1.amazonaws.com.cn":           "cn-north-1",
		"vpce-0123-abcd.vpce-svc-0123.us-west-2.vpce.amazonaws.com": "us-west-2",
		"127.0.0.1":       "",
		"broker.internal": "",
	} {
		if got := RegionOfHost(host); got != want {
			t.Errorf("RegionOfHost(%s) = %q, want %q", host, got, want)
		}
	}
}

// TestWithoutTheDefaultChain: awsAddDefaultProviders=false leaves the default chain out, as
// MSKCredentialProvider does: a profile without keys then finds none, though the environment
// has some; with the chain the environment's are used. Alone, the option is refused.
func TestWithoutTheDefaultChain(t *testing.T) {
	testkit.IsolateAWS(t, "AWS_ACCESS_KEY_ID", testAccessKey, "AWS_SECRET_ACCESS_KEY", testSecretKey, "AWS_REGION", "us-east-1")
	conf := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(conf, []byte("[profile nokeys]\nregion = us-east-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CONFIG_FILE", conf)
	for _, c := range []struct {
		jaas map[string]string
		ok   bool
	}{
		{map[string]string{"awsProfileName": "nokeys"}, true},
		{map[string]string{"awsProfileName": "nokeys", "awsAddDefaultProviders": "false"}, false},
	} {
		o, err := OptionsFromJAAS(c.jaas, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewSession(context.Background(), o, "kafkatrail-test")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.OAuthToken(context.Background()); (err == nil) != c.ok {
			t.Fatalf("%v: %v, want ok=%v", c.jaas, err, c.ok)
		}
	}
	if _, err := OptionsFromJAAS(map[string]string{"awsAddDefaultProviders": "false"}, nil); err == nil {
		t.Fatal("awsAddDefaultProviders=false alone: accepted, want refused (no credentials left)")
	}
}
