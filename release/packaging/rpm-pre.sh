# kafkatrail-agent %pre
set -e
@USER@
