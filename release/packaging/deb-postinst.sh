#!/bin/sh
# kafkatrail-agent postinst
set -e
case "$1" in
configure)
	@STATEDIR@
	# Only with systemd running: in a chroot or a container image build there is no manager
	# to reload, and systemctl would fail. A first install starts nothing (the configuration
	# needs brokers and files first: systemctl enable --now kafkatrail-agent); an upgrade
	# restarts an agent that was running, on the new binary.
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload || true
		if [ -n "$2" ]; then
			systemctl try-restart kafkatrail-agent.service || true
		fi
	fi
	;;
esac
