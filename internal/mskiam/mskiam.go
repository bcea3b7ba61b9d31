// Package mskiam authenticates to Amazon MSK with IAM access control, as AWS's Java library
// (software.amazon.msk:aws-msk-iam-auth) does, in both of its forms:
//
//   - OAUTHBEARER with a token made by AWS's own Go signer (aws-msk-iam-sasl-signer-go): a
//     SigV4-presigned URL of the action kafka-cluster:Connect, base64url-encoded (Java's
//     IAMOAuthBearerLoginCallbackHandler);
//   - the AWS_MSK_IAM mechanism: a JSON payload of the same presigned request's parameters for
//     the broker's host (Java's IAMSaslClient and AWS4SignedPayloadGenerator).
//
// Credentials come from the AWS SDK's default chain (environment, shared config and profiles,
// web identity for EKS pods (IRSA), container and instance metadata), after a named profile and
// an assumed role when the JAAS options ask for them, as MSKCredentialProvider orders them.
package mskiam

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-msk-iam-sasl-signer-go/signer"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/kafkatrail/kafkatrail/network"
)

// Mechanism is the SASL mechanism of aws-msk-iam-auth's IAMLoginModule.
const Mechanism = "AWS_MSK_IAM"

// Java class names a Java client's properties give, which select this package.
const (
	// LoginModule is sasl.jaas.config's module for Mechanism.
	LoginModule = "software.amazon.msk.auth.iam.IAMLoginModule"
	// ClientCallbackHandler is sasl.client.callback.handler.class with Mechanism.
	ClientCallbackHandler = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
	// OAuthBearerLoginCallbackHandler is sasl.login.callback.handler.class with OAUTHBEARER.
	OAuthBearerLoginCallbackHandler = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
)

// Options are the credentials' JAAS options, by aws-msk-iam-auth's names
// (MSKCredentialProvider): none means the default chain alone.
type Options struct {
	Profile         string // awsProfileName: a profile of the shared config and credentials files
	RoleARN         string // awsRoleArn: a role assumed with STS
	RoleSessionName string // awsRoleSessionName (default aws-msk-iam-auth)
	RoleExternalID  string // awsRoleExternalId
	// RoleAccessKeyID, RoleSecretAccessKey and RoleSessionToken (awsRoleAccessKeyId, ...) are
	// the credentials the role is assumed with, instead of the chain's.
	RoleAccessKeyID, RoleSecretAccessKey, RoleSessionToken string
	STSRegion                                              string // awsStsRegion (default aws-global)
	// NoDefaultChain is awsAddDefaultProviders=false: only the profile and the role are asked.
	NoDefaultChain bool
}

// jaasOptions maps the JAAS option names to Options' fields.
var jaasOptions = map[string]func(*Options) *string{
	"awsProfileName":         func(o *Options) *string { return &o.Profile },
	"awsRoleArn":             func(o *Options) *string { return &o.RoleARN },
	"awsRoleSessionName":     func(o *Options) *string { return &o.RoleSessionName },
	"awsRoleExternalId":      func(o *Options) *string { return &o.RoleExternalID },
	"awsRoleAccessKeyId":     func(o *Options) *string { return &o.RoleAccessKeyID },
	"awsRoleSecretAccessKey": func(o *Options) *string { return &o.RoleSecretAccessKey },
	"awsRoleSessionToken":    func(o *Options) *string { return &o.RoleSessionToken },
	"awsStsRegion":           func(o *Options) *string { return &o.STSRegion },
}

// ignoredJAASOptions are aws-msk-iam-auth options that tune the Java SDK's own behaviour
// (debug logging, retries, FIPS endpoints, a region provider class): accepted, and left to the
// Go SDK's defaults.
var ignoredJAASOptions = map[string]bool{
	"awsDebugCreds": true, "awsMaxRetries": true, "awsMaxBackOffTimeMs": true, "awsShouldUseFips": true,
	"awsMskRegionProvider": true,
}

// OptionsFromJAAS reads the JAAS options of IAMLoginModule or OAuthBearerLoginModule; an option
// of neither library is an error naming it (never its value).
func OptionsFromJAAS(opts map[string]string, ownOptions func(string) bool) (Options, error) {
	var o Options
	for k, v := range opts {
		if f, ok := jaasOptions[k]; ok {
			*f(&o) = v
			continue
		}
		if k == "awsAddDefaultProviders" {
			o.NoDefaultChain = strings.EqualFold(v, "false")
			continue
		}
		if ignoredJAASOptions[k] || (ownOptions != nil && ownOptions(k)) {
			continue
		}
		return o, fmt.Errorf("option %s: not an aws-msk-iam-auth option (awsProfileName, awsRoleArn, awsRoleSessionName, awsRoleExternalId, awsStsRegion, ...)", k)
	}
	if (o.RoleAccessKeyID == "") != (o.RoleSecretAccessKey == "") {
		return o, errors.New("awsRoleAccessKeyId and awsRoleSecretAccessKey go together")
	}
	if o.RoleARN == "" && (o.RoleAccessKeyID != "" || o.RoleExternalID != "" || o.RoleSessionName != "") {
		return o, errors.New("awsRoleSessionName, awsRoleExternalId and awsRoleAccessKeyId need awsRoleArn")
	}
	if o.NoDefaultChain && o.Profile == "" && o.RoleARN == "" {
		return o, errors.New("awsAddDefaultProviders=false leaves no credentials: name awsProfileName or awsRoleArn")
	}
	return o, nil
}

// Session is the credentials and region of one client: it makes OAUTHBEARER tokens and runs
// the AWS_MSK_IAM exchange. Safe for concurrent use.
type Session struct {
	creds  aws.CredentialsProvider
	region string // the default region, for OAUTHBEARER and hosts that name none
	// UserAgent goes into AWS_MSK_IAM payloads.
	userAgent string
	now       func() time.Time
}

// NewSession resolves the AWS configuration: the region (AWS_REGION, the profile's, instance
// metadata) and the credentials chain, which is asked for credentials only when a token or a
// payload is made. userAgent names the client in AWS_MSK_IAM payloads.
func NewSession(ctx context.Context, o Options, userAgent string) (*Session, error) {
	base, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if base.Region == "" {
		// On EC2 (and EKS nodes) without AWS_REGION, the instance's region, as Java's
		// DefaultAwsRegionProviderChain ends with; elsewhere this fails quickly.
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if ic, err := config.LoadDefaultConfig(ictx, config.WithEC2IMDSRegion()); err == nil {
			base.Region = ic.Region
		}
		cancel()
	}
	var chain chainProvider
	if o.Profile != "" {
		pc, err := config.LoadDefaultConfig(ctx, config.WithSharedConfigProfile(o.Profile))
		if err != nil {
			return nil, fmt.Errorf("awsProfileName %s: %w", o.Profile, err)
		}
		chain = append(chain, named{"profile " + o.Profile, pc.Credentials})
		if base.Region == "" {
			base.Region = pc.Region
		}
	}
	if o.RoleARN != "" {
		stsCfg := base.Copy()
		stsCfg.Region = o.STSRegion
		if stsCfg.Region == "" {
			stsCfg.Region = "aws-global" // MSKCredentialProvider's default: STS's global endpoint
		}
		if o.RoleAccessKeyID != "" {
			stsCfg.Credentials = credentials.NewStaticCredentialsProvider(o.RoleAccessKeyID, o.RoleSecretAccessKey, o.RoleSessionToken)
		}
		session := o.RoleSessionName
		if session == "" {
			session = "aws-msk-iam-auth"
		}
		role := stscreds.NewAssumeRoleProvider(sts.NewFromConfig(stsCfg), o.RoleARN, func(ro *stscreds.AssumeRoleOptions) {
			ro.RoleSessionName = session
			if o.RoleExternalID != "" {
				ro.ExternalID = aws.String(o.RoleExternalID)
			}
		})
		chain = append(chain, named{"role " + o.RoleARN, role})
	}
	// The default chain last, as MSKCredentialProvider adds it unless awsAddDefaultProviders=false.
	if !o.NoDefaultChain {
		chain = append(chain, named{"the default chain (environment, shared config, web identity, container, instance metadata)", base.Credentials})
	}
	return &Session{creds: aws.NewCredentialsCache(chain), region: base.Region, userAgent: userAgent, now: time.Now}, nil
}

// NewStaticSession is a session with fixed credentials and region, for tests.
func NewStaticSession(creds aws.CredentialsProvider, region, userAgent string) *Session {
	return &Session{creds: creds, region: region, userAgent: userAgent, now: time.Now}
}

// Region is the session's default region.
func (s *Session) Region() string { return s.region }

// named is a credentials provider with a name for errors.
type named struct {
	name string
	aws.CredentialsProvider
}

// chainProvider asks each provider in turn and returns the first credentials found, as the
// Java SDK's AwsCredentialsProviderChain does; when none has any, the error names each one's
// failure.
type chainProvider []named

func (c chainProvider) Retrieve(ctx context.Context) (aws.Credentials, error) {
	var errs []string
	for _, p := range c {
		if p.CredentialsProvider == nil {
			continue
		}
		creds, err := p.Retrieve(ctx)
		if err == nil && creds.HasKeys() {
			return creds, nil
		}
		if err == nil {
			err = errors.New("no credentials")
		}
		errs = append(errs, p.name+": "+err.Error())
	}
	return aws.Credentials{}, fmt.Errorf("no AWS credentials found: %s", strings.Join(errs, "; "))
}

// credentials returns the session's credentials, or an *network.AuthenticationError naming
// mechanism and saying none were found.
func (s *Session) credentials(ctx context.Context, mechanism string) (aws.Credentials, error) {
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		// The SDK's cache prefixes every failure with the same words.
		msg := strings.ReplaceAll(err.Error(), "failed to refresh cached credentials, ", "")
		return creds, &network.AuthenticationError{Mechanism: mechanism, Message: "AWS MSK IAM: " + msg, Err: errNoCredentials}
	}
	return creds, nil
}

var errNoCredentials = errors.New("no AWS credentials")

// OAuthToken makes an OAUTHBEARER token with AWS's signer (GenerateAuthTokenFromCredentialsProvider)
// for the session's region, and returns when it expires (15 minutes after it was signed).
func (s *Session) OAuthToken(ctx context.Context) (string, time.Time, error) {
	if s.region == "" {
		return "", time.Time{}, &network.AuthenticationError{Mechanism: network.SASLOAuthBearer, Err: errNoRegion,
			Message: "AWS MSK IAM: no AWS region (set AWS_REGION, or a region in the profile)"}
	}
	creds, err := s.credentials(ctx, network.SASLOAuthBearer)
	if err != nil {
		return "", time.Time{}, err
	}
	tok, expMs, err := signer.GenerateAuthTokenFromCredentialsProvider(ctx, s.region, credentials.StaticCredentialsProvider{Value: creds})
	if err != nil {
		return "", time.Time{}, &network.AuthenticationError{Mechanism: network.SASLOAuthBearer, Message: "AWS MSK IAM: " + err.Error(), Err: err}
	}
	return tok, time.UnixMilli(expMs), nil
}

var errNoRegion = errors.New("no AWS region")

// DescribeToken says whose an OAUTHBEARER token is, for an error when the broker refuses it:
// the access key id (an identifier, not a secret), the region and when it was signed, so that
// a user sees which credentials the chain found. Never the signature or a session token.
func DescribeToken(token string) string {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "an AWS MSK IAM token"
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		return "an AWS MSK IAM token"
	}
	q := u.Query()
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(scope) != 5 {
		return "an AWS MSK IAM token"
	}
	temp := ""
	if q.Get("X-Amz-Security-Token") != "" {
		temp = " (temporary credentials)"
	}
	return fmt.Sprintf("an AWS MSK IAM token of access key %s%s for %s signed %s", scope[0], temp, scope[2], q.Get("X-Amz-Date"))
}

// payloadVersion is AuthenticationRequestParams.VERSION_1, the payload's version.
const payloadVersion = "2020_10_22"

// expiry is how long a signature is valid (AWS4SignedPayloadGenerator.EXPIRY_DURATION_MINUTES).
const expiry = 15 * time.Minute

// emptySHA256 is the SHA-256 of an empty body, the presigned GET's payload hash.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Payload is the first AWS_MSK_IAM message for a broker at host, signed at now with creds for
// region: AWS4SignedPayloadGenerator.signedPayload, a JSON object of the presigned GET
// https://host/?Action=kafka-cluster:Connect's query parameters (their names lower-cased), its
// host header, the payload's version and userAgent. Its keys are in the order Java's HashMap
// gives them, so that it equals the Java library's byte for byte.
func Payload(ctx context.Context, creds aws.Credentials, host, region, userAgent string, now time.Time) ([]byte, error) {
	u := url.URL{Scheme: "https", Host: host, Path: "/",
		RawQuery: url.Values{"Action": {"kafka-cluster:Connect"}, "X-Amz-Expires": {fmt.Sprint(int(expiry.Seconds()))}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	signed, _, err := v4.NewSigner().PresignHTTP(ctx, creds, req, emptySHA256, "kafka-cluster", region, now.UTC())
	if err != nil {
		return nil, err
	}
	su, err := url.Parse(signed)
	if err != nil {
		return nil, err
	}
	kv := map[string]string{"version": payloadVersion, "user-agent": userAgent, "host": host}
	for k, v := range su.Query() {
		kv[strings.ToLower(k)] = strings.Join(v, ";")
	}
	return jsonObject(kv), nil
}

// Authenticate runs the AWS_MSK_IAM exchange with the broker at host (network.SASLExchange):
// the payload first, then the broker's answer, a JSON object with its request id; an empty
// answer is a failure (IAMSaslClient.evaluateChallenge). The region is the one host names
// (b-1.cluster.abc123.c2.kafka.us-east-1.amazonaws.com), else the session's.
func (s *Session) Authenticate(ctx context.Context, host string, step func([]byte) ([]byte, error)) error {
	region := RegionOfHost(host)
	if region == "" {
		region = s.region
	}
	if region == "" {
		return &network.AuthenticationError{Mechanism: Mechanism, Err: errNoRegion,
			Message: fmt.Sprintf("AWS MSK IAM: broker host %s names no AWS region, and none is configured (AWS_REGION)", host)}
	}
	creds, err := s.credentials(ctx, Mechanism)
	if err != nil {
		return err
	}
	payload, err := Payload(ctx, creds, host, region, s.userAgent, s.now())
	if err != nil {
		return &network.AuthenticationError{Mechanism: Mechanism, Message: "AWS MSK IAM: signing: " + err.Error(), Err: err}
	}
	reply, err := step(payload)
	if err != nil {
		return err
	}
	if len(reply) == 0 {
		return &network.AuthenticationError{Mechanism: Mechanism, Err: errEmptyResponse,
			Message: "AWS MSK IAM: the broker's answer is empty"}
	}
	return nil
}

var errEmptyResponse = errors.New("empty authentication response")

// regionPattern finds an AWS region among a host's labels: us-east-1, eu-central-2,
// us-gov-west-1, cn-north-1, ap-southeast-5.
var regionPattern = regexp.MustCompile(`(?:^|\.)([a-z]{2}(?:-gov|-iso[a-z]?)?-[a-z]+-[0-9]+)(?:\.|$)`)

// RegionOfHost is the AWS region a broker's host name names, "" if none (Java's
// RegionUtils.extractRegionFromHost looks for a known region's name in it).
func RegionOfHost(host string) string {
	if m := regionPattern.FindStringSubmatch(host); m != nil {
		return m[1]
	}
	return ""
}
