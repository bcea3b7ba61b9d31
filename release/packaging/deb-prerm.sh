#!/bin/sh
# kafkatrail-agent prerm
set -e
case "$1" in
remove | deconfigure)
	# SIGTERM: the agent flushes and saves its checkpoints before its binary goes away.
	if [ -d /run/systemd/system ]; then
		systemctl stop kafkatrail-agent.service || true
	fi
	;;
esac
