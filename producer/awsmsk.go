package producer

import (
	"context"
	"strings"

	"github.com/kafkatrail/kafkatrail/internal/mskiam"
	"github.com/kafkatrail/kafkatrail/internal/version"
	"github.com/kafkatrail/kafkatrail/network"
)

// Amazon MSK with IAM access control, configured as a Java client is for AWS's
// aws-msk-iam-auth library (internal/mskiam does the signing):
//
//	sasl.mechanism=AWS_MSK_IAM
//	sasl.jaas.config=software.amazon.msk.auth.iam.IAMLoginModule required;
//	sasl.client.callback.handler.class=software.amazon.msk.auth.iam.IAMClientCallbackHandler
//
// or, with OAUTHBEARER:
//
//	sasl.mechanism=OAUTHBEARER
//	sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
//	sasl.login.callback.handler.class=software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler
//
// The JAAS options awsProfileName, awsRoleArn (with awsRoleSessionName, awsRoleExternalId,
// awsStsRegion) choose the credentials; the default chain is always last.

// awsMSKOAuth reports whether OAUTHBEARER's token comes from AWS's MSK IAM signer.
func (c *Config) awsMSKOAuth() bool {
	return strings.EqualFold(c.SASLMechanism, network.SASLOAuthBearer) &&
		c.SASLLoginCallbackHandlerClass == mskiam.OAuthBearerLoginCallbackHandler
}

// awsMSK reports whether the producer authenticates with AWS MSK IAM, in either form.
func (c *Config) awsMSK() bool {
	return strings.EqualFold(c.SASLMechanism, mskiam.Mechanism) || c.awsMSKOAuth()
}

// awsMSKOptions are the credentials' JAAS options. OAuthBearerLoginModule's entry may also
// carry SASL extensions.
func (c *Config) awsMSKOptions() (mskiam.Options, error) {
	e, err := c.jaasOptions()
	if err != nil || e == nil {
		return mskiam.Options{}, err
	}
	return mskiam.OptionsFromJAAS(e.options, func(k string) bool { return strings.HasPrefix(k, jaasExtensionPrefix) })
}

// validateAWSMSK checks the AWS MSK IAM properties, naming their keys.
func (c *Config) validateAWSMSK(bad func(key, format string, args ...any)) {
	if strings.EqualFold(c.SASLMechanism, mskiam.Mechanism) {
		switch c.SASLClientCallbackHandlerClass {
		case "", mskiam.ClientCallbackHandler:
		default:
			bad("sasl.client.callback.handler.class", "with sasl.mechanism=AWS_MSK_IAM, only %s is understood, got %q",
				mskiam.ClientCallbackHandler, c.SASLClientCallbackHandlerClass)
		}
	}
	if _, err := c.awsMSKOptions(); err != nil {
		bad("sasl.jaas.config", "%v", err)
	}
}

// awsMSKSession builds the AWS session (region and credentials chain) the producer signs
// with. Credentials are looked for when a connection authenticates, not here.
func (c *Config) awsMSKSession(ctx context.Context) (*mskiam.Session, error) {
	o, err := c.awsMSKOptions()
	if err != nil {
		return nil, &ConfigError{Key: "sasl.jaas.config", Reason: err.Error()}
	}
	s, err := mskiam.NewSession(ctx, o, "kafkatrail/"+version.Version())
	if err != nil {
		return nil, &ConfigError{Key: "sasl.jaas.config", Reason: "AWS MSK IAM: " + err.Error()}
	}
	return s, nil
}
