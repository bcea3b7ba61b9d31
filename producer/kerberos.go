package producer

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kafkatrail/kafkatrail/internal/kerberos"
)

// Kerberos (SASL GSSAPI), configured as a Java client is, or by librdkafka's names:
//
//	sasl.mechanism=GSSAPI
//	sasl.kerberos.service.name=kafka
//	sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true \
//	    storeKey=true keyTab="/etc/security/keytabs/agent.keytab" principal="agent@EXAMPLE.COM";
//
// or useTicketCache=true for a ticket cache another process keeps fresh; krb5.conf is
// KRB5_CONFIG's, else /etc/krb5.conf. internal/kerberos does the login and the exchange.

// krb5LoginOptions are the Krb5LoginModule options a client's JAAS line may carry: those read,
// and those the JDK's module has that change nothing here (the login is gokrb5's).
var krb5LoginOptions = map[string]bool{
	"useKeyTab": true, "keyTab": true, "principal": true, "useTicketCache": true, "ticketCache": true,
	"serviceName": true, "storeKey": false, "doNotPrompt": false, "renewTGT": false, "debug": false,
	"isInitiator": false, "refreshKrb5Config": false, "tryFirstPass": false, "useFirstPass": false,
	"storePass": false, "clearPass": false,
}

// gssapi reports whether the producer authenticates with Kerberos.
func (c *Config) gssapi() bool { return strings.EqualFold(c.SASLMechanism, kerberos.Mechanism) }

// kerberosConfig is the login's configuration: the properties first (Java's
// sasl.kerberos.service.name, librdkafka's sasl.kerberos.principal and sasl.kerberos.keytab),
// then Krb5LoginModule's options in sasl.jaas.config.
func (c *Config) kerberosConfig() (kerberos.Config, error) {
	var opts map[string]string
	e, err := c.jaasOptions()
	if err != nil {
		return kerberos.Config{}, err
	}
	if e != nil {
		opts = e.options
		for k := range opts {
			if _, ok := krb5LoginOptions[k]; !ok {
				return kerberos.Config{}, fmt.Errorf("option %s: not a Krb5LoginModule option", k)
			}
		}
	}
	flag := func(k string) bool { v, _ := strconv.ParseBool(opts[k]); return v }
	kc := kerberos.Config{
		ServiceName:    firstNonEmpty(c.SASLKerberosServiceName, opts["serviceName"]),
		Principal:      firstNonEmpty(c.SASLKerberosPrincipal, opts["principal"]),
		Keytab:         c.SASLKerberosKeytab,
		UseTicketCache: flag("useTicketCache"),
		TicketCache:    opts["ticketCache"],
	}
	if kc.Keytab == "" && flag("useKeyTab") {
		kc.Keytab = opts["keyTab"]
		if kc.Keytab == "" {
			return kc, fmt.Errorf("useKeyTab=true needs keyTab=\"/path/to/file.keytab\"")
		}
	}
	if kc.Keytab != "" {
		kc.UseTicketCache = false // the keytab wins, as in Krb5LoginModule with both set
	}
	if kc.Keytab == "" && !kc.UseTicketCache {
		return kc, fmt.Errorf("no credentials: useKeyTab=true with keyTab= (or sasl.kerberos.keytab), or useTicketCache=true")
	}
	if kc.Keytab != "" && kc.Principal == "" {
		return kc, fmt.Errorf("a keytab needs principal=\"user@REALM\" (or sasl.kerberos.principal)")
	}
	return kc, nil
}

// validateGSSAPI checks the Kerberos properties, naming their keys; the login itself (krb5.conf,
// the keytab's keys, the KDC) is tried when the producer is made.
func (c *Config) validateGSSAPI(bad func(key, format string, args ...any)) {
	if c.SASLKerberosServiceName == "" && c.jaasOption(kerberos.LoginModule, "serviceName") == "" {
		bad("sasl.kerberos.service.name", "required with sasl.mechanism=GSSAPI (the broker's principal is NAME/host@REALM; usually kafka)")
	}
	if _, err := c.kerberosConfig(); err != nil {
		bad("sasl.jaas.config", "%v", err)
	}
	if f := c.SASLKerberosTicketRenewWindowFactor; f != 0 && (f < 0.5 || f > 1) {
		bad("sasl.kerberos.ticket.renew.window.factor", "must be between 0.5 and 1.0, got %v", f)
	}
}

// kerberosLogin logs in (a failure names the cause: a wrong keytab, an unknown principal, no
// ticket cache, the KDC unreachable).
func (c *Config) kerberosLogin() (*kerberos.Login, error) {
	kc, err := c.kerberosConfig()
	if err != nil {
		return nil, &ConfigError{Key: "sasl.jaas.config", Reason: err.Error()}
	}
	l, err := kerberos.NewLogin(kc)
	if err != nil {
		return nil, &ConfigError{Key: "sasl.jaas.config", Reason: "GSSAPI: " + err.Error()}
	}
	return l, nil
}

// closeSASL ends what the SASL exchange keeps running (the Kerberos ticket renewal).
func (p *Producer) closeSASL() {
	if p.sasl == nil {
		return
	}
	if c, ok := p.sasl.Exchange.(io.Closer); ok {
		_ = c.Close()
	}
}
