import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import javax.security.auth.callback.Callback;
import javax.security.auth.login.AppConfigurationEntry;
import javax.security.sasl.Sasl;
import javax.security.sasl.SaslClient;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import software.amazon.msk.auth.iam.IAMClientCallbackHandler;
import software.amazon.msk.auth.iam.IAMLoginModule;
import software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler;
import software.amazon.msk.auth.iam.internals.IAMSaslClient;

/**
 * Prints what AWS's aws-msk-iam-auth library sends, with the credentials of the environment
 * (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN) and AWS_REGION:
 *
 *   oauthbearer JAAS  the OAUTHBEARER token IAMOAuthBearerLoginCallbackHandler makes
 *                     (a base64url presigned URL) for sasl.jaas.config JAAS
 *   aws_msk_iam HOST  the first AWS_MSK_IAM message IAMSaslClient sends to broker HOST
 *                     (the JSON payload of AWS4SignedPayloadGenerator)
 */
public class MskIamOracle {
    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "oauthbearer": {
                Map<String, ?> configs = configs("OAUTHBEARER", args[1]);
                List<AppConfigurationEntry> entries = JaasContext.loadClientContext(configs).configurationEntries();
                IAMOAuthBearerLoginCallbackHandler handler = new IAMOAuthBearerLoginCallbackHandler();
                handler.configure(configs, "OAUTHBEARER", entries);
                OAuthBearerTokenCallback callback = new OAuthBearerTokenCallback();
                handler.handle(new Callback[] {callback});
                System.out.println(callback.token().value());
                break;
            }
            case "aws_msk_iam": {
                String jaas = IAMLoginModule.class.getName() + " required;";
                Map<String, ?> configs = configs(IAMLoginModule.MECHANISM, jaas);
                List<AppConfigurationEntry> entries = JaasContext.loadClientContext(configs).configurationEntries();
                new IAMLoginModule(); // registers the SASL client providers
                IAMClientCallbackHandler handler = new IAMClientCallbackHandler();
                handler.configure(configs, IAMLoginModule.MECHANISM, entries);
                SaslClient client = Sasl.createSaslClient(
                    new String[] {IAMSaslClient.getMechanismNameForClassLoader(handler.getClass().getClassLoader())},
                    null, "kafka", args[1], new HashMap<String, Object>(), handler);
                byte[] first = client.evaluateChallenge(new byte[0]);
                System.out.println(new String(first, StandardCharsets.UTF_8));
                break;
            }
            default:
                throw new IllegalArgumentException("oauthbearer JAAS | aws_msk_iam HOST");
        }
    }

    private static Map<String, ?> configs(String mechanism, String jaas) {
        Properties p = new Properties();
        p.put("bootstrap.servers", "127.0.0.1:9");
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("security.protocol", "SASL_SSL");
        p.put("sasl.mechanism", mechanism);
        p.put("sasl.jaas.config", jaas);
        return new ProducerConfig(p).values();
    }
}
