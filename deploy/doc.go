// Package deploy holds no code: its tests check the deployment files (docker-compose.yml,
// deploy/k8s) against what the binaries actually read.
package deploy
