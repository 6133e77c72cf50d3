-- wrk script: PROPFIND Depth 0 (allprop) of the URL wrk is given.
wrk.method = "PROPFIND"
wrk.headers["Depth"] = "0"
wrk.headers["Content-Type"] = 'application/xml; charset="utf-8"'
wrk.body = '<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>'
