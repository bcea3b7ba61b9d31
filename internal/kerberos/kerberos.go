// Package kerberos is SASL GSSAPI (Kerberos V5, RFC 4752) for the producer, as the Java client
// runs it with the JDK's Krb5LoginModule and GssKrb5Client: a login with a keytab or from a
// ticket cache, the service ticket for sasl.kerberos.service.name/host, the AP-REQ, then the
// security layer negotiation, wrapped. The Kerberos protocol itself is gokrb5's
// (github.com/jcmturner/gokrb5/v8).
package kerberos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/spnego"

	"github.com/kafkatrail/kafkatrail/network"
)

// Mechanism is the SASL mechanism's name.
const Mechanism = "GSSAPI"

// LoginModule is the JAAS login module a Java client names for GSSAPI.
const LoginModule = "com.sun.security.auth.module.Krb5LoginModule"

// Config is how the client logs in, by the JAAS options of Krb5LoginModule and the Kafka
// properties a Java client (and librdkafka) has.
type Config struct {
	// ServiceName is sasl.kerberos.service.name (or the JAAS option serviceName): the
	// broker's principal is ServiceName/host@REALM.
	ServiceName string
	// Principal is the client's principal (principal=, sasl.kerberos.principal): user@REALM,
	// or user in krb5.conf's default realm.
	Principal string
	// Keytab is keyTab= with useKeyTab=true (sasl.kerberos.keytab): the client logs in with
	// its key and logs in again whenever its ticket nears its end, for as long as it runs.
	Keytab string
	// TicketCache, with UseTicketCache, is the credential cache another process (kinit,
	// k5start, sssd) keeps fresh: ticketCache=, else KRB5CCNAME, else /tmp/krb5cc_UID. It is
	// read again when it changes.
	UseTicketCache bool
	TicketCache    string
	// Krb5Conf is the krb5.conf to read: KRB5_CONFIG, else /etc/krb5.conf.
	Krb5Conf string
}

// Login is a logged-in client: it authenticates connections (network.SASLExchange) and keeps
// its ticket fresh. Safe for concurrent use; Close stops its renewal.
type Login struct {
	cfg Config
	krb *config.Config

	mu        sync.Mutex
	cl        *client.Client
	ccache    string    // the ticket cache read, when logging in from one
	ccModTime time.Time // its modification time when read
}

// NewLogin reads krb5.conf and logs in (an AS exchange with the keytab's key, or the ticket
// cache's TGT), so that a wrong keytab, an unknown principal or an expired cache fail at start,
// as the Java client's login does in its constructor.
func NewLogin(cfg Config) (*Login, error) {
	if cfg.ServiceName == "" {
		return nil, errors.New("sasl.kerberos.service.name: required with sasl.mechanism=GSSAPI (the broker's principal is NAME/host@REALM; usually kafka)")
	}
	if cfg.Krb5Conf == "" {
		cfg.Krb5Conf = os.Getenv("KRB5_CONFIG")
	}
	if cfg.Krb5Conf == "" {
		cfg.Krb5Conf = "/etc/krb5.conf"
	}
	krb, err := config.Load(cfg.Krb5Conf)
	if err != nil {
		// gokrb5 reports the lines it did not understand but still loads the rest.
		var uerr config.UnsupportedDirective
		if !errors.As(err, &uerr) {
			return nil, fmt.Errorf("krb5.conf %s: %v", cfg.Krb5Conf, err)
		}
	}
	l := &Login{cfg: cfg, krb: krb}
	if err := l.login(); err != nil {
		return nil, err
	}
	return l, nil
}

// login makes the gokrb5 client: from the keytab (an AS exchange now; gokrb5 then renews the
// TGT, or logs in again, before it ends) or from the ticket cache.
func (l *Login) login() error {
	if l.cfg.Keytab != "" {
		kt, err := keytab.Load(l.cfg.Keytab)
		if err != nil {
			return fmt.Errorf("keytab %s: %v", l.cfg.Keytab, err)
		}
		user, realm := l.splitPrincipal()
		if user == "" {
			return errors.New("principal: required with a keytab (principal=\"user@REALM\" in sasl.jaas.config, or sasl.kerberos.principal)")
		}
		cl := client.NewWithKeytab(user, realm, kt, l.krb, client.DisablePAFXFAST(true))
		if err := cl.Login(); err != nil {
			return fmt.Errorf("login as %s@%s with keytab %s: %s", user, realm, l.cfg.Keytab, describe(err))
		}
		l.cl = cl
		return nil
	}
	path := l.ticketCache()
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("ticket cache %s: %v (log in with kinit first, or use a keytab)", path, err)
	}
	cc, err := credentials.LoadCCache(path)
	if err != nil {
		return fmt.Errorf("ticket cache %s: %v", path, err)
	}
	cl, err := client.NewFromCCache(cc, l.krb, client.DisablePAFXFAST(true))
	if err != nil {
		return fmt.Errorf("ticket cache %s: %v", path, err)
	}
	if want := l.cfg.Principal; want != "" && !samePrincipal(want, cc.DefaultPrincipal.PrincipalName.PrincipalNameString()+"@"+cc.DefaultPrincipal.Realm, l.krb.LibDefaults.DefaultRealm) {
		return fmt.Errorf("ticket cache %s holds %s@%s, not the principal %s", path,
			cc.DefaultPrincipal.PrincipalName.PrincipalNameString(), cc.DefaultPrincipal.Realm, want)
	}
	if end, renewTill, ok := tgtTimes(cc); ok && time.Now().After(end) && time.Now().After(renewTill) {
		return fmt.Errorf("ticket cache %s: the ticket of %s@%s expired at %s and cannot be renewed (log in again with kinit, or use a keytab)",
			path, cc.DefaultPrincipal.PrincipalName.PrincipalNameString(), cc.DefaultPrincipal.Realm, end.UTC().Format(time.RFC3339))
	}
	if l.cl != nil {
		l.cl.Destroy()
	}
	l.cl, l.ccache, l.ccModTime = cl, path, st.ModTime()
	return nil
}

// tgtTimes is the end and renew-till times of the cache's ticket-granting ticket.
func tgtTimes(cc *credentials.CCache) (end, renewTill time.Time, ok bool) {
	for _, c := range cc.GetEntries() {
		if n := c.Server.PrincipalName.NameString; len(n) == 2 && n[0] == "krbtgt" {
			return c.EndTime, c.RenewTill, true
		}
	}
	return end, renewTill, false
}

// ticketCache is the cache to read: ticketCache=, else KRB5CCNAME (FILE: caches only), else
// /tmp/krb5cc_UID, as the JDK's Krb5LoginModule and MIT Kerberos find it.
func (l *Login) ticketCache() string {
	if l.cfg.TicketCache != "" {
		return strings.TrimPrefix(l.cfg.TicketCache, "FILE:")
	}
	if v := os.Getenv("KRB5CCNAME"); v != "" {
		return strings.TrimPrefix(v, "FILE:")
	}
	return fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid())
}

// splitPrincipal is the configured principal's name and realm (krb5.conf's default realm
// when it names none).
func (l *Login) splitPrincipal() (user, realm string) {
	user, realm, ok := strings.Cut(l.cfg.Principal, "@")
	if !ok || realm == "" {
		realm = l.krb.LibDefaults.DefaultRealm
	}
	return user, realm
}

func samePrincipal(a, b, defaultRealm string) bool {
	if !strings.Contains(a, "@") {
		a += "@" + defaultRealm
	}
	return a == b
}

// Close stops the client's ticket renewal.
func (l *Login) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cl != nil {
		l.cl.Destroy()
		l.cl = nil
	}
	return nil
}

// client returns the logged-in client, reading the ticket cache again when another process
// renewed it (it is newer than when read).
func (l *Login) client() (*client.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cl == nil {
		return nil, errors.New("closed")
	}
	if l.ccache != "" {
		if st, err := os.Stat(l.ccache); err == nil && st.ModTime().After(l.ccModTime) {
			if err := l.login(); err != nil {
				return nil, err
			}
		}
	}
	return l.cl, nil
}

// ServiceHost is the host of a broker's service principal, as the Java client forms it
// (SaslChannelBuilder: the connection's InetAddress.getHostName()): the host name the address
// has, and for an IP address the name its reverse lookup gives (127.0.0.1 is localhost).
func ServiceHost(host string) string {
	if net.ParseIP(host) == nil {
		return host
	}
	names, err := net.LookupAddr(host)
	if err != nil || len(names) == 0 {
		return host
	}
	return strings.TrimSuffix(names[0], ".")
}

// GSS-API flags the initiator asks for: integrity and confidentiality available, as the JDK's
// GssKrb5Client requests them; no mutual authentication (its default) and no delegation.
var gssFlags = []int{gssapi.ContextFlagInteg, gssapi.ContextFlagConf}

// Authenticate runs SASL GSSAPI with the broker at host (network.SASLExchange), as the JDK's
// GssKrb5Client does it for Kafka's SaslClientAuthenticator: the AP-REQ for the service
// ticket of ServiceName/host; an empty reply (or the AP-REP, when the broker sends one) is
// answered with an empty message; the broker then sends its security layers, wrapped (RFC 4121
// integrity), and the client answers "no security layer", a maximum buffer of 0 and its
// principal as the authorization id, wrapped with its key.
func (l *Login) Authenticate(ctx context.Context, host string, step func([]byte) ([]byte, error)) error {
	cl, err := l.client()
	if err != nil {
		return l.failed(err)
	}
	spn := l.cfg.ServiceName + "/" + ServiceHost(host)
	tkt, key, err := cl.GetServiceTicket(spn)
	if err != nil {
		return l.failed(fmt.Errorf("service ticket for %s@%s: %s", spn, cl.Credentials.Realm(), describe(err)))
	}
	tok, err := spnego.NewKRB5TokenAPREQ(cl, tkt, key, gssFlags, nil)
	if err != nil {
		return l.failed(fmt.Errorf("AP-REQ for %s: %v", spn, err))
	}
	apReq, err := tok.Marshal()
	if err != nil {
		return l.failed(fmt.Errorf("AP-REQ for %s: %v", spn, err))
	}
	challenge, err := step(apReq)
	if err != nil {
		return err
	}
	if !isWrapToken(challenge) {
		// An empty reply, or an AP-REP (mutual authentication): the context is established and
		// the client answers with nothing, after which the broker sends its security layers
		// (GssKrb5Client.evaluateChallenge). Without mutual authentication the JDK's server
		// sends them at once, in reply to the AP-REQ.
		if len(challenge) > 0 {
			var rep spnego.KRB5Token
			if err := rep.Unmarshal(challenge); err != nil || !rep.IsAPRep() {
				return l.failed(fmt.Errorf("the broker's reply to the AP-REQ is neither an AP-REP nor its security layers (%d bytes)", len(challenge)))
			}
		}
		if challenge, err = step(nil); err != nil {
			return err
		}
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(challenge, true); err != nil {
		return l.failed(fmt.Errorf("the broker's security layer message: %v", err))
	}
	if ok, err := wt.Verify(key, keyusage.GSSAPI_ACCEPTOR_SEAL); !ok {
		return l.failed(fmt.Errorf("the broker's security layer message does not verify with the session key: %v", err))
	}
	if len(wt.Payload) != 4 {
		return l.failed(fmt.Errorf("the broker's security layer message has %d bytes, want 4", len(wt.Payload)))
	}
	if wt.Payload[0]&noSecurityLayer == 0 {
		return l.failed(fmt.Errorf("the broker offers security layers %#x, not none (the only one Kafka uses)", wt.Payload[0]))
	}
	// No security layer, a maximum buffer of 0, and the authorization id: the principal, as
	// Kafka's SaslClientAuthenticator gives the JDK its client principal name.
	answer := binary.BigEndian.AppendUint32(nil, uint32(noSecurityLayer)<<24)
	answer = append(answer, cl.Credentials.CName().PrincipalNameString()+"@"+cl.Credentials.Realm()...)
	out, err := gssapi.NewInitiatorWrapToken(answer, key)
	if err != nil {
		return l.failed(err)
	}
	b, err := out.Marshal()
	if err != nil {
		return l.failed(err)
	}
	_, err = step(b)
	return err
}

// isWrapToken reports whether b starts as an RFC 4121 Wrap token (TOK_ID 05 04).
func isWrapToken(b []byte) bool { return len(b) >= 16 && b[0] == 0x05 && b[1] == 0x04 }

// noSecurityLayer is RFC 4752's security layer bit for "no security layer".
const noSecurityLayer = 0x01

// failed is a local failure of the exchange: an *network.AuthenticationError naming GSSAPI.
func (l *Login) failed(err error) error {
	return &network.AuthenticationError{Mechanism: Mechanism, Message: err.Error(), Err: errKerberos}
}

var errKerberos = errors.New("Kerberos")

// describe names a Kerberos error by what its code means, the cause a user can act on (clock
// skew, unknown principal, wrong key, expired ticket), followed by gokrb5's text.
func describe(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "] "); strings.HasPrefix(msg, "[Root cause: ") && i > 0 {
		msg = msg[i+2:]
	}
	for _, c := range krbCauses {
		if strings.Contains(msg, c.code) {
			return c.cause + ": " + msg
		}
	}
	return msg
}

// krbCauses are the Kerberos errors users meet, by the name gokrb5 prints, with their cause;
// the first that a message holds names it.
var krbCauses = []struct{ code, cause string }{
	{"KDC_ERR_C_PRINCIPAL_UNKNOWN", "the client principal is unknown to the KDC"},
	{"KDC_ERR_S_PRINCIPAL_UNKNOWN", "the service principal is unknown to the KDC (check sasl.kerberos.service.name and the broker's host name)"},
	{"KDC_ERR_PREAUTH_FAILED", "the key does not match the KDC's (a wrong or stale keytab)"},
	{"KRB_AP_ERR_SKEW", "the clocks differ by more than the allowed skew"},
	{"KRB_AP_ERR_TKT_EXPIRED", "the ticket has expired"},
	{"KDC_ERR_KEY_EXPIRED", "the password (key) has expired"},
	{"KDC_ERR_CLIENT_REVOKED", "the client principal is disabled or locked"},
	{"KRB_AP_ERR_MODIFIED", "the key does not decrypt the message (a wrong or stale keytab)"},
	{"KDC_ERR_ETYPE_NOSUPP", "no encryption type the client and the KDC share"},
	// gokrb5's words when the KDC's answer does not decrypt with the client's key.
	{"client password/keytab incorrect", "the key does not match the KDC's (a wrong or stale keytab)"},
}
