#!/bin/sh
# kafkatrail-agent preinst
set -e
case "$1" in
install | upgrade)
	@USER@
	;;
esac
