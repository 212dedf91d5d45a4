"""The web console the gateway serves at `/`: plain HTML, CSS and ES modules shipped in this
package (no build step, no CDN), which speak only the gateway's public REST and SSE APIs."""
