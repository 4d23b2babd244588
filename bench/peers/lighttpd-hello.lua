local r = lighty.r
r.resp_header["Content-Type"] = "text/plain"
r.resp_body:set({ "Hello, World!" })
return 200
