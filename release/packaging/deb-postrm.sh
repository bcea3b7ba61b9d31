#!/bin/sh
# kafkatrail-agent postrm: remove leaves /etc/kafkatrail (dpkg keeps conffiles) and
# /var/lib/kafkatrail (checkpoints: a reinstall resumes where the agent stopped) and the user;
# purge removes them all.
set -e
case "$1" in
purge)
	# Left by `systemctl enable`, which the package never ran itself.
	rm -f /etc/systemd/system/multi-user.target.wants/kafkatrail-agent.service
	rm -rf /var/lib/kafkatrail
	if getent passwd kafkatrail >/dev/null; then
		userdel kafkatrail || echo "kafkatrail-agent: could not remove the user kafkatrail" >&2
	fi
	if getent group kafkatrail >/dev/null; then
		groupdel kafkatrail || echo "kafkatrail-agent: could not remove the group kafkatrail" >&2
	fi
	;;
esac
case "$1" in
remove | purge)
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
	fi
	;;
esac
